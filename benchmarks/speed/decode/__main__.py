"""The command line of the study: `python -m benchmarks.speed.decode` (see `__init__`)."""

import sys
import tempfile
from pathlib import Path

import keras
import numpy as np
from keras import ops

from benchmarks.harness import flags, machine, results
from benchmarks.harness.peers import KerasHubTransformer
from benchmarks.speed.decode import ctranslate2_peer
from benchmarks.speed.decode.decoders import (
    FIRST_REGULAR_ID,
    LABELS,
    check_outputs,
    decoder_ratios,
    decoders,
    measure_decoders,
)
from benchmarks.speed.decode.latency import LATENCY_WARMUPS, measure_latency
from benchmarks.speed.decode.report import print_report, results_json
from keras_transformer.config import TrainConfig, preset
from keras_transformer.models import build_transformer


def build_parser():
    """The study's flags: the configs' fields by their own names, then the study's own."""
    parser = flags.study_parser(__package__)
    flags.add_config_flags(
        parser, TrainConfig, "model (TrainConfig fields)", fields=("preset",), defaults={"preset": "small"}
    )
    study = parser.add_argument_group("the study")
    study.add_argument("--vocab-size", type=int, default=8000, help="Source and target vocabulary size V.")
    study.add_argument("--batch-size", type=int, default=32, help="Sentences per batch of the batch decoders.")
    study.add_argument("--source-len", type=int, default=20, help="Source length S in ids (random, no padding).")
    study.add_argument(
        "--output-tokens", type=int, default=40, help="Tokens every sentence gets (the model's max_target_len)."
    )
    study.add_argument("--repeats", type=int, default=5, help="Timed calls of every batch decoder, interleaved.")
    study.add_argument(
        "--jit-compile",
        type=flags.boolean,
        default=False,
        metavar="JIT_COMPILE",
        help="Compile the decoders with XLA (true or false): tf.function(jit_compile=True) on TensorFlow, jax.jit "
        "on JAX.",
    )
    study.add_argument(
        "--latency-requests",
        type=int,
        default=50,
        help=f"Timed single-sentence requests to each of the six exports (four compiled decoders off "
        f"TensorFlow), after {LATENCY_WARMUPS} warm-ups (0 skips).",
    )
    study.add_argument(
        "--ctranslate2",
        type=flags.boolean,
        default=True,
        metavar="CTRANSLATE2",
        help="Also time the CTranslate2 engine on our weights (true or false; needs the ctranslate2 extra): "
        "float32 and int8, 1 and 2 threads, in the batch and the single-sentence runs.",
    )
    flags.add_seed_flags(study, help="Seed of the weights and of the source ids.")
    flags.add_output_flags(study, __package__, "decode")
    return parser


def parse_args(argv=None):
    """The study's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = build_parser()
    args = flags.parse(parser, argv)
    flags.check_at_least(parser, args, ("vocab_size", "batch_size", "source_len", "output_tokens", "repeats"), 1)
    if args.vocab_size <= FIRST_REGULAR_ID:
        parser.error(f"--vocab-size must be > {FIRST_REGULAR_ID} (ids 0-3 are reserved). Received: {args.vocab_size}")
    flags.check_at_least(parser, args, ("latency_requests",), 0)
    if args.ctranslate2:
        try:
            import ctranslate2  # noqa: F401
        except ImportError:
            parser.error(
                '--ctranslate2 true needs CTranslate2: pip install "keras-transformer[ctranslate2]" (or pass '
                "--ctranslate2 false)"
            )
    if args.jit_compile and keras.backend.backend() not in ("tensorflow", "jax"):
        parser.error(f"--jit-compile compiles with XLA, on TensorFlow or JAX; Keras runs {keras.backend.backend()}")
    # --preset, --batch-size and --seed, checked by TrainConfig's own rules.
    vocabulary = {"source_vocab_size": args.vocab_size, "target_vocab_size": args.vocab_size}
    flags.config_from_flags(parser, args, TrainConfig, vocab_size=TrainConfig.vocab_size, **vocabulary)
    return args


def build_models(args):
    """Our model and the keras-hub peer at `--preset`, randomly initialised (seeded by the caller).

    Returns:
        `(model_config, model, hub, params)`, `params` the parameter count of each.
    """
    model_config = preset(
        args.preset,
        source_vocab_size=args.vocab_size,
        target_vocab_size=args.vocab_size,
        max_source_len=args.source_len,
        max_target_len=args.output_tokens,
    )
    model = build_transformer(model_config)
    hub = KerasHubTransformer(model_config)
    params = {"ours": int(model.count_params()), "keras_hub": int(hub.model.count_params())}
    print(f"parameters: ours {params['ours']:,}, keras-hub {params['keras_hub']:,}", flush=True)
    return model_config, model, hub, params


def main(argv=None):
    """Build both models, time the decoders and the export, print the report, write the JSON."""
    args = parse_args(argv)
    cpu = machine.cpu_info()
    keras.utils.set_random_seed(args.seed)
    tokens = args.output_tokens
    model_config, model, hub, params = build_models(args)
    rng = np.random.default_rng(args.seed)
    source_ids = rng.integers(FIRST_REGULAR_ID, args.vocab_size, size=(args.batch_size, args.source_len), dtype="int32")

    fns = decoders(model, hub, tokens, args.jit_compile)
    first_call, times, outputs = measure_decoders(
        fns, ops.convert_to_tensor(source_ids), args.repeats, (args.batch_size, tokens)
    )
    checks = check_outputs(args, hub, source_ids, outputs)
    medians = {name: float(np.median(seconds)) for name, seconds in times.items()}
    ratios = decoder_ratios(medians)
    latency, engine = {}, {}
    if args.latency_requests:
        latency = measure_latency(model, model_config, hub, source_ids, args.latency_requests, args.jit_compile)
    if args.ctranslate2:  # after ours, each setting in a process of its own (see ctranslate2_peer)
        with tempfile.TemporaryDirectory() as folder:
            seconds = ctranslate2_peer.convert(model, model_config, Path(folder) / "model")
            engine["batches"], engine_latency = ctranslate2_peer.measure(
                Path(folder) / "model",
                seconds,
                source_ids,
                tokens,
                args.repeats,
                args.latency_requests,
                outputs,
                medians,
            )
        if engine_latency:
            latency.update(engine_latency)
            engine["latency"] = ctranslate2_peer.latency_ratios(latency)
    print_report(args, params, first_call, medians, ratios, latency, checks, cpu, engine)

    decoder_results = {
        name: {
            "label": LABELS[name],
            "first_call_seconds": first_call[name],
            "median_seconds_per_batch": medians[name],
            "sentences_per_second": args.batch_size / medians[name],
            "output_tokens_per_second": args.batch_size * tokens / medians[name],
            "raw_seconds": times[name],
        }
        for name in fns
    }
    measured = {
        "decoders": decoder_results,
        "ratios": ratios,
        "checks": checks,
        "latency": latency,
        "ctranslate2": engine,
    }
    path = results.write_json(flags.output_path(args), results_json(args, model_config, params, cpu, measured))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
