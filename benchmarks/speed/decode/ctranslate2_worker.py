"""One CTranslate2 setting in a process of its own, timing the decodes the study asks for (JSON lines).

    python -m benchmarks.speed.decode.ctranslate2_worker MODEL_DIR --compute-type float32 --threads 1

It imports neither TensorFlow nor Keras, so no other thread pool shares the cores while it decodes,
as in a deployment of the engine. Each request line is a JSON object:

    {"source_ids": [[..], ..], "beam_size": 4, "max_length": 40, "forced": true, "repeats": 5}
        decodes the whole batch once untimed, then `repeats` times timed;
        answers {"seconds": [..], "output_ids": [[..], ..]}
    {"sentences": [[..], ..], "beam_size": 1, "max_length": 40, "warmups": 3}
        decodes the first `warmups` sentences untimed, then each sentence alone, timed;
        answers {"ms": [..], "lengths": [..]}

`forced`: exactly `max_length` tokens each (`min_decoding_length` = `max_decoding_length`);
otherwise until `</s>`, which may come first, as in our decoders. Reserved tokens but `</s>` are
never emitted, and beams are ranked by log-probability (`length_penalty` 0). The worker exits when
its standard input closes.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from keras_transformer.data.special_tokens import END_ID, PAD_ID, RESERVED_TOKENS, START_ID


class Engine:
    """A `ctranslate2.Translator` of a converted model, decoding token ids (the model's vocabulary is by id)."""

    def __init__(self, folder, compute_type, threads):
        import ctranslate2

        self.translator = ctranslate2.Translator(
            str(folder), device="cpu", compute_type=compute_type, intra_threads=threads
        )
        files = sorted(Path(folder).glob("*vocabulary.json"))  # shared_, or source_ and target_
        self.source_tokens = json.loads(files[0].read_text())
        self.ids = {token: i for i, token in enumerate(json.loads(files[-1].read_text()))}
        self.suppressed = [[RESERVED_TOKENS[PAD_ID]], [RESERVED_TOKENS[START_ID]]]
        assert RESERVED_TOKENS[END_ID] in self.ids

    def decode(self, source_ids, beam_size, max_length, forced):
        """Source ids `[B, S]` -> int32 `[B, max_length]`: `max_length` tokens each (`forced`), or until `</s>`."""
        results = self.translator.translate_batch(
            [[self.source_tokens[i] for i in row if i != PAD_ID] for row in source_ids],
            beam_size=beam_size,
            length_penalty=0.0,
            max_decoding_length=max_length,
            min_decoding_length=max_length if forced else 0,
            disable_unk=True,
            suppress_sequences=self.suppressed,
            return_end_token=True,
        )
        output = np.zeros((len(results), max_length), np.int32)
        for row, result in enumerate(results):
            ids = [self.ids[token] for token in result.hypotheses[0]]
            output[row, : len(ids)] = ids
        return output


def answer(engine, request):
    """The answer to one request (see the module's docstring)."""
    beam_size, max_length = request["beam_size"], request["max_length"]
    if "source_ids" in request:
        output = engine.decode(request["source_ids"], beam_size, max_length, request["forced"])
        seconds = []
        for _ in range(request["repeats"]):
            start = time.perf_counter()
            engine.decode(request["source_ids"], beam_size, max_length, request["forced"])
            seconds.append(time.perf_counter() - start)
        return {"seconds": seconds, "output_ids": output.tolist()}
    sentences = request["sentences"]
    for i in range(request["warmups"]):
        engine.decode([sentences[i % len(sentences)]], beam_size, max_length, forced=False)
    milliseconds, lengths = [], []
    for sentence in sentences:
        start = time.perf_counter()
        output = engine.decode([sentence], beam_size, max_length, forced=False)[0]
        milliseconds.append(1000 * (time.perf_counter() - start))
        ends = np.flatnonzero(output == END_ID)
        lengths.append(int(ends[0]) + 1 if len(ends) else len(output))
    return {"ms": milliseconds, "lengths": lengths}


def main(argv=None):
    """Load the model in one setting, then answer each request line of standard input until it closes."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed.decode.ctranslate2_worker")
    parser.add_argument("model_dir", help="the converted model (ctranslate2_peer.convert)")
    parser.add_argument("--compute-type", default="float32", help="the engine's compute_type")
    parser.add_argument("--threads", type=int, default=1, help="the engine's intra_threads")
    args = parser.parse_args(argv)
    engine = Engine(args.model_dir, args.compute_type, args.threads)
    for line in sys.stdin:
        print(json.dumps(answer(engine, json.loads(line))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
