"""Scoring a trained model for the Multi30k study: the test split and the validation decodings.

`score_test` translates the whole test_2016_flickr split (1,000 sentences, or the first
`--test-size`) twice, with the same decodings for both models, and scores each with sacreBLEU
and chrF: beam search of `--beam-size` (4; the model's final decoding, the headline's) and greedy.
Ours' beam search is our `beam_search`, ranked with our GNMT length penalty (`--length-penalty`);
keras-hub's is `keras_hub.samplers.BeamSampler`, which ranks by summed log-probability (it has
no length penalty, and it keeps extending a hypothesis after its `</s>` until every beam of the
batch has one: keras-hub's beam search as it comes). So beam against beam and greedy against
greedy compare like with like, and beam against greedy shows what each model's beam search adds.

`score_validation_decodings` scores our trained model on the whole validation split once per
`--validation-decodings` setting: the way to choose the beam size and length penalty without
looking at the test split.
"""

import time

from benchmarks.translation.multi30k.data import read_split
from keras_transformer.evaluation import score_translations, translate_texts


def final_decoding(args, name):
    """`(beam_size, length_penalty)` of model `name`'s test decoding: `--beam-size` for both, our alpha for ours.

    keras-hub's `BeamSampler` has no length penalty: None. At `--beam-size` 1 both are greedy.
    """
    if args.beam_size == 1:
        return 1, None
    return args.beam_size, args.length_penalty if name == "ours" else None


def score_test(args, name, translator, greedy, test_text):
    """Translate the test split with beam search of `--beam-size` (the final decoding) and greedily; score both.

    Args:
        args: the worker's flags.
        name: the model, `ours` or `keras-hub`.
        translator: the worker's factory, `translator(beam_size, length_penalty=None)`.
        greedy: its greedy translator (`translator(1)`), already traced by the curve.
        test_text: the test split's `ParallelText`.

    Returns:
        `(result, hypotheses, final)`: `{"model", "decoding", "beam_size", "length_penalty",
        "test", "test_greedy"}` (`test` scores the final decoding, `test_greedy` the greedy one;
        both `score_translations` dicts), the final decoding's translations and its translator.
    """
    references = test_text.targets
    beam_size, length_penalty = final_decoding(args, name)
    result = {
        "model": name,
        "decoding": decoding_name(beam_size, length_penalty),
        "beam_size": beam_size,
        "length_penalty": length_penalty,
    }
    final = greedy if beam_size == 1 else translator(beam_size, length_penalty)
    hypotheses = translate_texts(final, test_text.sources)
    result["test"] = score_translations(hypotheses, references)
    greedy_hypotheses = hypotheses if final is greedy else translate_texts(greedy, test_text.sources)
    result["test_greedy"] = score_translations(greedy_hypotheses, references)
    test, greedy_test = result["test"], result["test_greedy"]
    print(
        f"{name}: test_2016 BLEU {test['bleu']:.2f}, chrF {test['chrf']:.2f} ({result['decoding']})"
        + (f"; greedy BLEU {greedy_test['bleu']:.2f}, chrF {greedy_test['chrf']:.2f}" if final is not greedy else ""),
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


def decoding_name(beam_size, length_penalty=None):
    """`greedy`, `beam B, alpha A` (our beam search) or `beam B, log-prob` (`BeamSampler`: no length penalty)."""
    if beam_size == 1:
        return "greedy"
    return f"beam {beam_size}, " + ("log-prob" if length_penalty is None else f"alpha {length_penalty:g}")
