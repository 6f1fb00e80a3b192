"""The corpus of the Multi30k study: Multi30k's files, the vocabularies and the training batches.

`--data` is a folder with Multi30k's `train`, `val` and `test_2016_flickr` splits, a
`.de.gz` and an `.en.gz` file each (German sources, English targets). The parent learns the
WordPiece vocabularies from the training split only (`prepare_vocabularies`): one of both sides'
text, of at most `--source-vocab-size` pieces, used on both sides by both models (`--joint-vocab
true`), or one per side, of at most `--source-vocab-size` and `--target-vocab-size` pieces. They
are cached in `--work-dir`, keyed by size, jointness and `--train-size`,
beside a record of the files they were learned from (another corpus in the same folder learns
them again), and learned outside every budget.

Each worker reads them back with the text (`load_worker_data`) and batches the training pairs
that fit in `--max-source-len` and `--max-target-len` tokens with `translation_batches.make_dataset`, shuffled with
`--seed` and bucketed by length (`training_batches`), so that both models train on the same
batches in the same order. `batch_fingerprint` hashes the first `FINGERPRINT_BATCHES` of them in
each worker, and the parent checks that the fingerprints agree.
"""

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from keras_transformer.data.parallel_text import ParallelText, read_parallel_files
from keras_transformer.data.tokenizers import SubwordTokenizer
from keras_transformer.data.translation_batches import EncodedPairs, encode_pairs, make_dataset
from keras_transformer.data.vocabulary import learn_translation_vocabularies, write_vocabulary

SOURCE_LANGUAGE, TARGET_LANGUAGE = "de", "en"
SPLIT_FILES = {"train": "train", "validation": "val", "test": "test_2016_flickr"}
FINGERPRINT_BATCHES = 20  # batches hashed to check that both models train on the same ones


def split_paths(data_dir, split):
    """`(German file, English file)` of a Multi30k split."""
    return tuple(
        Path(data_dir) / f"{SPLIT_FILES[split]}.{language}.gz" for language in (SOURCE_LANGUAGE, TARGET_LANGUAGE)
    )


def read_split(data_dir, split, size=0):
    """`ParallelText` of a split, cut to its first `size` pairs (0: all)."""
    return read_parallel_files(*split_paths(data_dir, split)).head(size)


def vocabulary_sizes(args):
    """`(source, target)`: the most pieces of each side's vocabulary (the one joint vocabulary's twice)."""
    return (args.source_vocab_size, args.source_vocab_size if args.joint_vocab else args.target_vocab_size)


def vocabulary_paths(args):
    """`{"source": path, "target": path}` of the cached vocabularies for the sizes and `--train-size`."""
    source, target = vocabulary_sizes(args)
    sizes = f"{source}_joint" if args.joint_vocab else f"{source}" if source == target else f"{source}_{target}"
    folder = Path(args.work_dir) / f"vocab{sizes}_train{args.train_size or 'all'}"
    return {side: folder / f"{side}_vocab.txt" for side in ("source", "target")}


def vocabulary_origin(args):
    """What the vocabularies are learned from: a different corpus in the same work dir relearns."""
    train_paths = split_paths(args.data, "train")
    return {
        "files": [str(path.resolve()) for path in train_paths],
        "file_bytes": [path.stat().st_size for path in train_paths],
        "train_size": args.train_size,
        "vocab_sizes": list(vocabulary_sizes(args)),
        "joint": args.joint_vocab,
    }


def prepare_vocabularies(args):
    """Learn the vocabularies from the training split, unless cached for the same files and sizes.

    Returns:
        `{"source_size", "target_size", "seconds" (0 when cached), "cached", "folder"}`.
    """
    paths = vocabulary_paths(args)
    folder = paths["source"].parent
    origin = vocabulary_origin(args)
    origin_path = folder / "origin.json"
    cached = all(path.is_file() for path in paths.values()) and (
        origin_path.is_file() and json.loads(origin_path.read_text()) == origin
    )
    seconds = 0.0
    if not cached:
        most = "/".join(map(str, sorted(set(vocabulary_sizes(args)))))
        print(f"Learning {most}-piece vocabularies from the training split into {folder} ...", flush=True)
        start = time.perf_counter()
        train = read_split(args.data, "train", args.train_size)
        folder.mkdir(parents=True, exist_ok=True)
        vocabularies = learn_translation_vocabularies(
            train.sources, train.targets, *vocabulary_sizes(args), joint=args.joint_vocab
        )
        for side, path in paths.items():
            write_vocabulary(vocabularies[side], path)
        origin_path.write_text(json.dumps(origin, indent=2) + "\n")
        seconds = time.perf_counter() - start
    sizes = {side: sum(1 for _ in path.open(encoding="utf-8")) for side, path in paths.items()}
    print(
        f"Vocabularies: {sizes['source']} {SOURCE_LANGUAGE} / {sizes['target']} {TARGET_LANGUAGE} pieces "
        f"({'cached' if cached else f'learned in {seconds:.0f} s'}, {folder})",
        flush=True,
    )
    return {
        "source_size": sizes["source"],
        "target_size": sizes["target"],
        "seconds": round(seconds, 1),
        "cached": cached,
        "folder": str(folder),
    }


def worker_dir(args, name):
    """The work folder of model `name`'s worker: its configs and result JSON."""
    return Path(args.work_dir) / name


@dataclass
class WorkerData:
    """What a worker trains and scores on: the tokenizers, the text and the encoded training pairs."""

    source_tokenizer: SubwordTokenizer
    target_tokenizer: SubwordTokenizer
    train_text: ParallelText
    test_text: ParallelText
    curve_text: ParallelText  # the first --curve-sentences of --curve-split
    pairs: EncodedPairs


def load_worker_data(args):
    """What a worker trains and scores on, as a `WorkerData`.

    Returns:
        The tokenizers of the parent's cached vocabularies, the training and test text, and the
        training pairs that fit in `--max-source-len` and `--max-target-len` tokens.
    """
    paths = vocabulary_paths(args)
    if not all(path.is_file() for path in paths.values()):
        raise FileNotFoundError(f"No vocabularies in {paths['source'].parent}: run without --worker first")
    source_tokenizer = SubwordTokenizer(str(paths["source"]), name="source_tokenizer")
    target_tokenizer = SubwordTokenizer(str(paths["target"]), name="target_tokenizer")
    train_text = read_split(args.data, "train", args.train_size)
    test_text = read_split(args.data, "test", args.test_size)
    curve_text = read_split(args.data, args.curve_split, args.curve_sentences)
    pairs = encode_pairs(
        train_text.sources,
        train_text.targets,
        source_tokenizer,
        target_tokenizer,
        args.max_source_len,
        args.max_target_len,
    )
    return WorkerData(source_tokenizer, target_tokenizer, train_text, test_text, curve_text, pairs)


def training_batches(args, pairs):
    """The training batches and their fingerprint.

    Returns:
        `(fingerprint, dataset)`: the fingerprint of the first `FINGERPRINT_BATCHES` (taken
        from a second, identical dataset) and the endless, shuffled, bucketed batches.
    """
    batching = dict(batch_size=args.batch_size, batch_tokens=args.batch_tokens, shuffle=True, repeat=True)
    fingerprint = batch_fingerprint(make_dataset(pairs, seed=args.seed, **batching), FINGERPRINT_BATCHES)
    return fingerprint, make_dataset(pairs, seed=args.seed, **batching)


def batch_fingerprint(dataset, batches):
    """SHA-256 of the ids and shapes of a dataset's first batches."""
    digest = hashlib.sha256()
    for (source_ids, target_in_ids), target_out_ids in dataset.take(batches):
        for tensor in (source_ids, target_in_ids, target_out_ids):
            array = tensor.numpy()
            digest.update(str(array.shape).encode())
            digest.update(array.tobytes())
    return digest.hexdigest()
