"""A worker process of the study: one library's models, and the orders it carries out.

The study runs itself twice with `--worker NAME` (`ours`, `keras-hub`). Each worker resolves
`--precision` (`choose_precision`), builds and compiles its models and their batches once
(`Worker`), answers one ready line (parameters, batch checksums, the precision chosen), then
carries out one order per JSON line on stdin, answering each with one JSON line on stdout:

    {"do": "peak"}                      the float32 matmul peak (`matmul_peak`)
    {"do": "train", "kind": KIND}       one round of `model.fit` for `--steps` steps: wall-clock and
                                        CPU seconds, tokens, loss, peak memory
    {"do": "generate", "index": I}      one timed call of each of its generators (the first call,
                                        I = 0, also checked against the uncached greedy decode)

An empty line, or the end of stdin, ends it.
"""

import json
import sys
import time

import numpy as np

from benchmarks.harness import machine
from benchmarks.harness.language_peers import build_model, keras_hub_cached_generate, uncached_greedy
from benchmarks.harness.language_workload import (
    FIRST_PIECE_ID,
    checksum,
    decoder_batches,
    encoder_batches,
    model_config,
    round_tokens,
)

CHECK_ROWS = 2  # rows of the uncached greedy check of each cached generation


def matmul_peak(size, repeats=7, chain=4):
    """The float32 matmul peak: the best FLOP/s of `repeats` timed chains, and the median FLOP per CPU-second.

    The best, not the median, wall-clock rate: on a shared machine a slower repeat measures the
    other jobs. FLOP per CPU-second (`time.process_time`, all threads) hardly depends on them.

    Returns:
        `{"float32": FLOP/s, "float32_per_cpu_second": FLOP per CPU-second}`.
    """
    from keras import ops

    rng = np.random.default_rng(0)
    a = ops.convert_to_tensor(rng.standard_normal((size, size), dtype="float32"))
    b = ops.convert_to_tensor(rng.standard_normal((size, size), dtype="float32") / size**0.5)

    def run():
        c = a
        for _ in range(chain):
            c = ops.matmul(c, b)
        return float(ops.convert_to_numpy(c[0, 0]))  # waits for the result

    run()
    rates, cpu_rates = [], []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        run()
        rates.append(chain * 2 * size**3 / (time.perf_counter() - start))
        cpu_rates.append(chain * 2 * size**3 / max(time.process_time() - cpu_start, 1e-9))
    return {"float32": float(max(rates)), "float32_per_cpu_second": float(np.median(cpu_rates))}


class Worker:
    """One library's models in a worker process: built, compiled, and the orders it carries out.

    Args:
        args: the parsed flags (`args.worker` names the library).
        precision: the dtype policy to build in.
    """

    def __init__(self, args, precision):
        import keras
        import keras_hub
        import tensorflow as tf

        from benchmarks.harness.fit_timing import RoundClock
        from keras_transformer.config import TrainConfig
        from keras_transformer.training import compile_transformer, dtype_policy

        self.args, self.name = args, args.worker
        keras.utils.set_random_seed(args.seed)
        self.models, self.data, self.tokens, self.checksums = {}, {}, {}, {}
        self.clock = RoundClock()  # a round's wall-clock and CPU seconds
        train_config = TrainConfig(warmup_steps=400, jit_compile=args.jit_compile)
        makers = {"decoder": decoder_batches, "encoder": encoder_batches}
        with dtype_policy(precision):
            for kind in args.kinds:
                config = model_config(args, kind)
                model, backbone = build_model(self.name, config)
                self.models[kind] = compile_transformer(model, config, train_config)
                if kind == "decoder" and backbone is not None:
                    self.causal_lm = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
                    self.causal_lm.compile(sampler="greedy")
                batches = makers[kind](args)
                self.checksums[kind] = checksum(batches)
                self.tokens[kind] = round_tokens(batches, args.steps)
                stacked = (np.stack([b[0] for b in batches]), np.stack([b[1] for b in batches]))
                self.data[kind] = tf.data.Dataset.from_tensor_slices(stacked).cache().repeat().prefetch(2)
        if "decoder" in args.kinds:
            rng = np.random.default_rng(args.seed + 2)
            self.prompts = rng.integers(
                FIRST_PIECE_ID, args.vocab_size, size=(args.batch_size, args.prompt_length), dtype="int32"
            )
            self.generators = self._generators()

    def ready(self, precision_choice):
        """The first line a worker answers: parameters, batch checksums, the precision chosen."""
        return {
            "ready": True,
            "parameters": {kind: int(model.count_params()) for kind, model in self.models.items()},
            "checksums": self.checksums,
            "precision": precision_choice,
        }

    def _generators(self):
        """`{label: function(prompt_ids) -> int32 [B, L] as NumPy}`, each traced once on its first call."""
        import keras_hub
        import tensorflow as tf

        length = self.args.prompt_length + self.args.new_tokens
        sampler = keras_hub.samplers.GreedySampler()
        if self.name == "ours":
            from keras_transformer.decoding.generation import generate

            model = self.models["decoder"]
            traced = tf.function(
                lambda ids: generate(model, ids, length, sampler=sampler, end_id=None),
                jit_compile=self.args.jit_compile,
                autograph=False,
            )
            return {"ours": lambda ids: traced(ids).numpy()}
        causal_lm = self.causal_lm
        traced = tf.function(
            lambda ids: keras_hub_cached_generate(causal_lm, sampler, ids, length),
            jit_compile=self.args.jit_compile,
            autograph=False,
        )
        if self.args.jit_compile:
            causal_lm.jit_compile = True

        def own_generate(ids):
            tokens = np.pad(ids, ((0, 0), (0, self.args.new_tokens)))
            inputs = {"token_ids": tokens, "padding_mask": tokens != 0}
            return np.asarray(causal_lm.generate(inputs, stop_token_ids=None)["token_ids"])

        return {"keras-hub": lambda ids: traced(ids).numpy(), "keras-hub generate": own_generate}

    def peak(self):
        """The float32 matmul peak (`matmul_peak`)."""
        return matmul_peak(self.args.peak_size)

    def train(self, kind):
        """One round of `model.fit` on `kind`'s batches: seconds, tokens, loss, peak memory."""
        args, model = self.args, self.models[kind]
        history = model.fit(
            self.data[kind], epochs=1, steps_per_epoch=args.steps, callbacks=[self.clock], shuffle=False, verbose=0
        )
        input_tokens, predicted_tokens = self.tokens[kind]
        assert int(history.history["target_tokens"][-1]) == predicted_tokens, "the round did not train on its batches"
        return {
            "seconds": self.clock.ended - self.clock.started,
            "cpu_seconds": self.clock.cpu_ended - self.clock.cpu_started,
            "input_tokens": input_tokens,
            "predicted_tokens": predicted_tokens,
            "loss": float(history.history["loss"][-1]),
            "peak_rss_mib": machine.peak_rss_mib(),
        }

    def generate(self, index):
        """One timed call of each generator (order alternating with `index`); the first also checks."""
        from keras_transformer.decoding import forbid_never_emitted

        labels = list(self.generators)
        report = {"seconds": {}, "cpu_seconds": {}}
        for label in labels if index % 2 == 0 else labels[::-1]:
            start, cpu_start = time.perf_counter(), time.process_time()
            outputs = self.generators[label](self.prompts)
            report["seconds"][label] = time.perf_counter() - start
            report["cpu_seconds"][label] = time.process_time() - cpu_start
            expected = (self.args.batch_size, self.args.prompt_length + self.args.new_tokens)
            assert outputs.shape == expected, f"{label} returned {outputs.shape}, expected {expected}"
            if index == 0:  # the warm-up call: check it against the uncached decode
                forbid = forbid_never_emitted if self.name == "ours" else (lambda logits: logits)
                reference = uncached_greedy(
                    self.models["decoder"], self.prompts[:CHECK_ROWS], self.args.new_tokens, forbid
                )
                report.setdefault("equal_to_uncached", {})[label] = float(np.mean(outputs[:CHECK_ROWS] == reference))
        report["peak_rss_mib"] = machine.peak_rss_mib()
        return report


def run_worker(args):
    """Build everything, answer the ready line, then carry out one order per JSON line on stdin."""
    from keras_transformer.precision import choose_precision

    choice = choose_precision(args.precision, machine.cpu_info())
    worker = Worker(args, choice.policy)
    print(json.dumps(worker.ready(choice.to_dict())), flush=True)
    for line in sys.stdin:
        if not line.strip():
            break
        order = json.loads(line)
        if order["do"] == "peak":
            answer = worker.peak()
        elif order["do"] == "train":
            answer = worker.train(order["kind"])
        else:
            answer = worker.generate(order["index"])
        print(json.dumps(answer), flush=True)
    return 0
