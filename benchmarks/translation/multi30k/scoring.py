"""Scoring a trained model for the Multi30k study: the test split and the validation decodings.

`score_test` translates the whole test_2016_flickr split (1,000 sentences, or the first
`--test-size`) with the model's final decoding and scores it with sacreBLEU and chrF. Ours
decodes by beam search (`--beam-size`, `--length-penalty`), and its greedy score is reported as
well, so the report shows how much of a difference comes from the decoding; keras-hub's model
decodes greedily.

`score_validation_decodings` scores our trained model on the whole validation split once per
`--validation-decodings` setting: the way to choose the beam size and length penalty without
looking at the test split.
"""

import time

from benchmarks.translation.multi30k.data import read_split
from keras_transformer.evaluation import score_translations, translate_texts


def score_test(args, name, translator, greedy, test_text):
    """Translate the test split with the model's final decoding and greedily; score both.

    The final decoding is ours' beam search when `--beam-size` > 1, greedy otherwise.

    Returns:
        `(result, hypotheses, final)`: `{"model", "decoding", "test", "test_greedy"}`, the final
        decoding's translations and its translator.
    """
    references = test_text.targets
    result = {"model": name, "decoding": "greedy"}
    final = greedy
    if name == "ours" and args.beam_size > 1:
        final = translator(args.beam_size)
        result["decoding"] = decoding_name(args.beam_size, args.length_penalty)
    hypotheses = translate_texts(final, test_text.sources)
    result["test"] = score_translations(hypotheses, references)
    greedy_hypotheses = hypotheses if final is greedy else translate_texts(greedy, test_text.sources)
    result["test_greedy"] = score_translations(greedy_hypotheses, references)
    print(
        f"{name}: test_2016 BLEU {result['test']['bleu']:.2f} ({result['decoding']}), chrF {result['test']['chrf']:.2f}"
        + (f"; greedy BLEU {result['test_greedy']['bleu']:.2f}" if final is not greedy else ""),
        flush=True,
    )
    return result, hypotheses, final


def score_validation_decodings(args, translator):
    """Our trained model on the whole validation split, once per `--validation-decodings` setting.

    Returns:
        `[{"beam_size", "length_penalty", "seconds", "bleu", "chrf", ...}, ...]` (sacreBLEU
        scores of `score_translations`), in the flag's order.
    """
    validation = read_split(args.data, "validation")
    scores = []
    for beam_size, length_penalty in args.validation_decodings:
        start = time.perf_counter()
        hypotheses = translate_texts(translator(beam_size, length_penalty), validation.sources)
        score = score_translations(hypotheses, validation.targets)
        scores.append(
            {"beam_size": beam_size, "length_penalty": length_penalty, "seconds": round(time.perf_counter() - start, 1)}
            | score
        )
        decoding = decoding_name(beam_size, length_penalty)
        print(f"ours: validation BLEU {score['bleu']:.2f}, chrF {score['chrf']:.2f} ({decoding})", flush=True)
    return scores


def decoding_name(beam_size, length_penalty):
    """`greedy` or `beam B, alpha A`."""
    return "greedy" if beam_size == 1 else f"beam {beam_size}, alpha {length_penalty:g}"
