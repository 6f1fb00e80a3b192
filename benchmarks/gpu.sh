#!/usr/bin/env bash
# Training throughput on one GPU with the JAX backend of Keras: benchmarks/train_throughput.py,
# our Transformer against keras-hub's, in mixed_bfloat16 and float32, XLA-compiled train steps.
#
#     bash benchmarks/gpu.sh                       # base preset, batch 256 x 64, 5 counted rounds of 30 steps
#     bash benchmarks/gpu.sh --rounds 3 --steps 10 # any train_throughput.py flag overrides the defaults below
#
# The layers are backend-neutral (keras.ops only), so the same model trains under JAX; only the
# benchmark's data feed differs (a Python generator instead of tf.data) and the BLEU part, which
# needs TensorFlow, is off (--bleu-epochs 0). Under JAX, compile(jit_compile=False) runs the train
# step eagerly, op by op; --jit makes Keras wrap it in jax.jit (one XLA compile per worker, in the
# uncounted warm-up round). JAX's default matmul precision lets float32 matmuls use TF32 on the
# GPU's tensor cores, in the model and in the "float32" matmul peak alike.
#
# What it needs: a Python with JAX for CUDA (e.g. pip install "jax[cuda12]") and numpy, and in
# it, or beside it, keras and keras-hub. TensorFlow is not needed, and this package is not
# installed: the script puts the repository root on PYTHONPATH. Either
#   - install them in that Python: pip install keras keras-hub; or
#   - on a machine without a network, put their wheels in .whl/ at the repository root: the
#     script installs .whl/*.whl into $SITE and puts $SITE on PYTHONPATH. keras and keras-hub
#     need namex and optree as well; their other requirements (absl-py, h5py, ml-dtypes,
#     packaging, regex, rich, tokenizers) must be in the Python already, and keras-hub's
#     kagglehub, sentencepiece and tensorflow-text are not needed to import it or build its
#     layers. Fetch the wheels on a machine with a network, for the GPU machine's Python and
#     platform (the command below: Python 3.12, x86-64 Linux), and keep them out of git
#     (echo /.whl/ >> .git/info/exclude):
#
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#         --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#         --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
#         -d .whl keras==3.15.1 keras-hub==0.32.0 namex==0.1.0 optree==0.20.0
#
# Environment:
#   PYTHON  the interpreter (default python3)
#   SITE    where the .whl/ wheels are installed (default /tmp/site)
#   OUT     where the results go (default benchmarks/results)
#
# Its own flags are all train_throughput.py's: they are passed on after the defaults below, so
# any of them overrides a default (see python benchmarks/train_throughput.py --help).
#
# It prints the GPU (nvidia-smi -L), the Python, JAX, its devices and the Keras and keras-hub
# versions, and stops if nvidia-smi sees a GPU but JAX's default backend is not the GPU. It
# writes $OUT/train_throughput_gpu.json (train_throughput.py's results: throughput, MFU, peak
# memory, the CPU model and flags, versions) and $OUT/train_throughput_gpu.log (everything
# printed, written as it goes, so a run cut short still leaves it). The default run makes 4
# worker starts and XLA compiles, then 24 rounds of 30 steps, 4 of them warm-up; pass e.g.
# --rounds 3 --steps 20 for a shorter one.
#
# Without nvidia-smi the GPU check is skipped, so a CPU-only machine with JAX can run it end to
# end with small flags, e.g.
#     PYTHON=/path/to/python-with-jax SITE=/tmp/site_cpu bash benchmarks/gpu.sh \
#         --preset tiny --batch-size 64 --length 24 --rounds 2 --steps 3 --peak-size 512
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD
PYTHON=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}
OUT=${OUT:-$REPO/benchmarks/results}
mkdir -p "$OUT"

if compgen -G ".whl/*.whl" >/dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
    export PYTHONPATH="$SITE:$REPO${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
fi
export KERAS_BACKEND=jax
# Three JAX processes share the GPU (the parent measures the matmul peak; two workers, one per
# model, stay alive): none may grab the default 75% of its memory up front.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export TF_CPP_MIN_LOG_LEVEL=2
export PYTHONUNBUFFERED=1
if command -v nvidia-smi >/dev/null; then
    GPU_EXPECTED=1
else
    GPU_EXPECTED=0
fi
export GPU_EXPECTED

{
    echo "== benchmarks/gpu.sh $* ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs)"
    if [ "$GPU_EXPECTED" = 1 ]; then
        nvidia-smi -L
    else
        echo "nvidia-smi: not found, GPU check skipped"
    fi
    "$PYTHON" - <<'EOF'
import os
import sys

import jax
import keras
import keras_hub

print(f"python {sys.version.split()[0]}, jax {jax.__version__}, devices {jax.devices()}")
print(f"keras {keras.__version__} (backend {keras.backend.backend()}), keras-hub {keras_hub.__version__}")
if os.environ["GPU_EXPECTED"] == "1" and jax.default_backend() != "gpu":
    sys.exit(f"nvidia-smi sees a GPU but JAX's default backend is {jax.default_backend()!r}: stopping")
EOF
    SECONDS=0
    "$PYTHON" benchmarks/train_throughput.py --jit --precision mixed_bfloat16 float32 --bleu-epochs 0 \
        --preset base --vocab 8000 --batch-size 256 --length 64 --steps 30 --rounds 5 --warmup-rounds 1 \
        --peak-size 8192 --out "$OUT/train_throughput_gpu.json" "$@"
    echo "== train_throughput.py took ${SECONDS} s"
} 2>&1 | tee "$OUT/train_throughput_gpu.log"
