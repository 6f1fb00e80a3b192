"""The command line of the study: `python -m benchmarks.translation.wild_input` (see `__init__`)."""

import statistics
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import flags, machine, results

PLAIN = "plain sentence"


def parse_args(argv=None):
    """The command line's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = flags.study_parser(__package__)
    parser.add_argument(
        "--model", type=Path, required=True, help="SavedModel folder, or a model folder of integer versions."
    )
    parser.add_argument("--repeats", type=int, default=9, help="Timed calls per input (after one untimed call).")
    flags.add_seed_flags(parser, help="Seed of the random bytes.")
    flags.add_output_flags(parser, __package__, "wild_input")
    args = flags.parse(parser, argv)
    flags.check_at_least(parser, args, ("repeats",), 1)
    return args


def text_inputs(max_text_bytes, max_bytes_per_word, seed):
    """`{name: bytes}`: the texts to time, the plain sentence first."""
    rng = np.random.default_rng(seed)
    long_word = b"a" * (max_bytes_per_word - 1) + b" "
    long_words = long_word * (max_text_bytes // len(long_word) + 1)
    return {
        PLAIN: b"march 21, 1987",
        "64 KiB of random bytes": rng.integers(0, 256, size=max_text_bytes, dtype=np.uint8).tobytes(),
        "64 KiB of one-letter words": b"a " * (max_text_bytes // 2),
        "64 KiB of U+FDFA (NFKC: 11x longer)": "\ufdfa".encode() * (max_text_bytes // 3),
        "64 KiB of words of 1,023 bytes": long_words[:max_text_bytes],
        "4 MiB of words of 1,023 bytes": long_words * 64,
    }


def time_calls(call, repeats):
    """Seconds of `repeats` calls of `call()`, after one untimed call."""
    call()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return seconds


def main(argv=None):
    """Time each input through the export; print the table and write the JSON."""
    args = parse_args(argv)
    cpu = machine.cpu_info()
    print(machine.cpu_line(cpu))

    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops of the SavedModel)

    from keras_transformer.data.tokenizers import MAX_BYTES_PER_WORD
    from keras_transformer.export import IDS_SIGNATURE_KEY, MAX_TEXT_BYTES, SIGNATURE_KEY, latest_version_dir

    version_dir = latest_version_dir(args.model)
    loaded = tf.saved_model.load(str(version_dir))
    calls = {}
    for name, text in text_inputs(MAX_TEXT_BYTES, MAX_BYTES_PER_WORD, args.seed).items():
        batch = tf.constant([text], dtype=tf.string)
        calls[name] = lambda batch=batch: loaded.signatures[SIGNATURE_KEY](text=batch)
    if IDS_SIGNATURE_KEY in loaded.signatures:
        translate_ids = loaded.signatures[IDS_SIGNATURE_KEY]
        for count in (64, 1_000_000):
            ids = tf.fill([1, count], tf.constant(5, tf.int32))
            calls[f"translate_ids: {count:,} ids"] = lambda ids=ids: translate_ids(source_ids=ids)

    seconds = {name: time_calls(call, args.repeats) for name, call in calls.items()}
    plain = statistics.median(seconds[PLAIN])
    rows = {
        name: {"fastest_s": min(values), "median_s": statistics.median(values), "seconds": values}
        for name, values in seconds.items()
    }
    print(f"SavedModel {version_dir}, {args.repeats} calls per input, one text per call")
    print(f"{'input':<40} {'fastest':>9} {'median':>9}  median / plain sentence")
    for name, row in rows.items():
        ratio = results.format_ratio(row["median_s"] / plain)
        print(f"{name:<40} {row['fastest_s'] * 1000:7.1f}ms {row['median_s'] * 1000:7.1f}ms  {ratio}")
    slowest = max(max(values) for values in seconds.values())
    print(f"slowest call: {slowest:.3f} s")
    path = results.write_json(
        flags.output_path(args),
        {
            "command": results.command_line(__package__, args.argv),
            "model": str(version_dir),
            "repeats": args.repeats,
            "max_text_bytes": MAX_TEXT_BYTES,
            "slowest_call_s": slowest,
            "machine": machine.machine(cpu),
            "versions": machine.package_versions({"tensorflow": "tensorflow", "tensorflow_text": "tensorflow-text"}),
            "inputs": rows,
        },
    )
    print(f"Wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
