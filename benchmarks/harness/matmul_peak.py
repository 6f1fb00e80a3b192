"""The machine's matmul peak, the denominator of model-FLOPs utilisation (MFU).

`matmul_peak` measures the median rate of `size`^3 matmuls in one dtype through `keras.ops`;
`matmul_peaks` those of several dtypes in this process, `matmul_peaks_elsewhere` in a fresh one
(`python -m benchmarks.harness.matmul_peak SIZE DTYPE ...`, which prints them as one JSON line),
for a process whose own threads are set for training towers. `peak_dtypes` says which peaks a run's
dtype policies need and `describe_peaks` prints them.
"""

import argparse
import json
import subprocess
import sys
import time

import numpy as np
from keras import ops


def matmul_peak(size, dtype, repeats=5, chain=4):
    """Median FLOP/s of `size`^3 matmuls in `dtype` (after one warm-up), through `keras.ops`."""
    rng = np.random.default_rng(0)
    a = ops.cast(ops.convert_to_tensor(rng.standard_normal((size, size), dtype="float32")), dtype)
    b = ops.cast(ops.convert_to_tensor(rng.standard_normal((size, size), dtype="float32") / size**0.5), dtype)

    def run():
        c = a
        for _ in range(chain):
            c = ops.matmul(c, b)
        return float(ops.convert_to_numpy(ops.cast(c[0, 0], "float32")))  # waits for the result

    run()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        rates.append(chain * 2 * size**3 / (time.perf_counter() - start))
    return float(np.median(rates))


def peak_dtypes(policies):
    """The matmul peaks `policies` need: float32's always, bfloat16's where a bfloat16 policy runs.

    (Under `ONEDNN_MAX_CPU_ISA=AVX2` on a CPU with AVX512-BF16, oneDNN crashes on a bfloat16
    matmul: a float32 run there measures no bfloat16 peak.)
    """
    return ("float32", "bfloat16") if any("bfloat16" in policy for policy in policies) else ("float32",)


def matmul_peaks(size, dtypes=("float32", "bfloat16")):
    """`{dtype: FLOP/s}`: `matmul_peak` of each of `dtypes`, in this process."""
    return {dtype: matmul_peak(size, dtype) for dtype in dtypes}


def describe_peaks(peak):
    """`"float32 N GFLOP/s, bfloat16 M GFLOP/s"`, or "bfloat16 not measured"."""
    bfloat16 = f"{peak['bfloat16'] / 1e9:,.0f} GFLOP/s" if "bfloat16" in peak else "not measured"
    return f"float32 {peak['float32'] / 1e9:,.0f} GFLOP/s, bfloat16 {bfloat16}"


def matmul_peaks_elsewhere(size, dtypes=("float32", "bfloat16")):
    """`matmul_peaks` measured in a fresh process of its own, with the backend's default threads.

    For a process that sets TensorFlow's threads for training towers (one intra-op thread): its
    own matmuls would run on one core, and the peak must be the machine's. The process is this
    module run with `python -m` from the working directory, as the studies are.
    """
    command = [sys.executable, "-m", __name__, str(int(size)), *dtypes]
    process = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if process.returncode:
        raise RuntimeError(f"the matmul peak's process failed:\n{process.stderr[-3000:]}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def main(argv=None):
    """Print `matmul_peaks(SIZE, DTYPES)` as one JSON line (`matmul_peaks_elsewhere`'s process)."""
    parser = argparse.ArgumentParser(description="Print the matmul peaks of this machine as one JSON line.")
    parser.add_argument("size", type=int, help="Matrix size of the measurement.")
    parser.add_argument("dtypes", nargs="+", help="Dtypes to measure, e.g. float32 bfloat16.")
    args = parser.parse_args(argv)
    print(json.dumps(matmul_peaks(args.size, tuple(args.dtypes))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
