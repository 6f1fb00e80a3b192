"""The key-value lookup task: exactly one position holds the answer.

Each example is a small dictionary of `P` pairs `(key_j, value_j)` with distinct keys, and a
query: one of the keys. The answer is the value stored under it. Attention that reads the
queried key's slot, and only it, answers every example; an average over other slots only adds
noise. That makes the task a clean test bed for hard attention (which reads one slot) against
soft attention (a weighted average). Generated in-library with NumPy, seeded: nothing to
download.

Shapes: `P` pairs per example, key symbols `0..num_keys-1`, value symbols `0..num_values-1`.
"""

import numpy as np

from keras_transformer.checks import check_int


def lookup_examples(count, pairs=8, num_keys=32, num_values=16, seed=0):
    """Make `count` lookup examples.

    Args:
        count: int, number of examples B.
        pairs: int P, key-value pairs per example (at most `num_keys`).
        num_keys: int, size of the key alphabet.
        num_values: int, size of the value alphabet (values may repeat within an example).
        seed: int, or a `numpy.random.Generator`; the same seed gives the same examples.

    Returns:
        `(inputs, answers, positions)`: `inputs` a dict of int32 arrays `"keys"` `[B, P]`,
        `"values"` `[B, P]` and `"query"` `[B]` (a key of the example); `answers` int32 `[B]`, the
        value under the queried key; `positions` int32 `[B]`, the pair that holds it.

    Raises:
        ValueError: a size is not a positive int, or `pairs > num_keys`.
    """
    for name, size in (("count", count), ("pairs", pairs), ("num_keys", num_keys), ("num_values", num_values)):
        check_int(name, size, 1)
    if pairs > num_keys:
        raise ValueError(f"`pairs` must be at most `num_keys`. Received: pairs={pairs}, num_keys={num_keys}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    # Distinct keys per example: the first P of a random permutation of the alphabet.
    keys = np.argsort(rng.random((count, num_keys)), axis=1)[:, :pairs].astype("int32")  # (B, P)
    values = rng.integers(0, num_values, (count, pairs), dtype="int32")  # (B, P)
    positions = rng.integers(0, pairs, count, dtype="int32")  # (B,)
    rows = np.arange(count)
    inputs = {"keys": keys, "values": values, "query": keys[rows, positions]}
    return inputs, values[rows, positions], positions
