"""The time of the costliest inputs a text export accepts, against a plain sentence, one text per call.

    python benchmarks/wild_input.py --model saved_models/transformer     # an export (latest version)
    python benchmarks/wild_input.py --model saved_models/transformer --repeats 3 --out /tmp/results
    python benchmarks/wild_input.py --help                               # every flag

The export's `serving_default` reads the first `MAX_TEXT_BYTES` (64 KiB) of each text and
tokenizes only the first `max_source_len + 1` words, so no text costs more than a bounded time.
This measures that bound on a real export: each input below is sent alone, `--repeats` times
after one untimed call (the graph's set-up), and the report gives the fastest and the median call
and the median's ratio to the plain sentence's, the peer of every row:

- a plain date (`"march 21, 1987"`);
- 64 KiB of random bytes (invalid UTF-8 included);
- 64 KiB of one-letter words (the most words);
- 64 KiB of U+FDFA, which Unicode NFKC makes 11 times longer;
- 64 KiB of words of 1,023 bytes, just under `MAX_BYTES_PER_WORD`, the costliest input known:
  WordPiece tries every piece length at every position of such a word;
- 4 MiB of those words (only the first 64 KiB are read);
- `translate_ids` with 64 ids and with 1,000,000 ids (columns beyond `max_source_len` are only
  checked), when the export has that signature.

It prints the CPU model and its matrix-multiply flags, the table, and writes `wild_input.json` in
the `--out` folder (settings, CPU model and flags, versions, every call's seconds).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import common
import numpy as np

PLAIN = "plain sentence"


def parse_args(argv=None):
    """The command line's flags, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument(
        "--model", type=Path, required=True, help="SavedModel folder, or a model folder of integer versions."
    )
    parser.add_argument("--repeats", type=int, default=9, help="Timed calls per input (after one untimed call).")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the random bytes.")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"), help="Folder of wild_input.json.")
    args = parser.parse_args(argv)
    common.check_at_least(parser, args, ("repeats",), 1)
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
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    cpu = common.cpu_info()
    print(common.cpu_line(cpu))

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
        ratio = common.format_ratio(row["median_s"] / plain)
        print(f"{name:<40} {row['fastest_s'] * 1000:7.1f}ms {row['median_s'] * 1000:7.1f}ms  {ratio}")
    slowest = max(max(values) for values in seconds.values())
    print(f"slowest call: {slowest:.3f} s")
    path = common.write_json(
        args.out / "wild_input.json",
        {
            "command": common.command_line(argv),
            "model": str(version_dir),
            "repeats": args.repeats,
            "max_text_bytes": MAX_TEXT_BYTES,
            "slowest_call_s": slowest,
            "machine": common.machine(cpu),
            "versions": common.package_versions({"tensorflow": "tensorflow", "tensorflow_text": "tensorflow-text"}),
            "inputs": rows,
        },
    )
    print(f"Wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
