#!/usr/bin/env bash
# Training throughput on one GPU with the JAX backend of Keras: benchmarks/train_throughput.py,
# our Transformer against keras-hub's, in mixed_bfloat16 and float32, XLA-compiled train steps.
#
#     bash benchmarks/gpu.sh                       # base preset, batch 256 x 64 (about 5 min on one H200)
#     bash benchmarks/gpu.sh --rounds 3 --steps 10 # any train_throughput.py flag overrides the defaults below
#
# The layers are backend-neutral (keras.ops only), so the same model trains under JAX; only the
# benchmark's data feed differs (a Python generator instead of tf.data) and the BLEU part, which
# needs TensorFlow, is off (--bleu-epochs 0). Under JAX, compile(jit_compile=False) runs the train
# step eagerly, op by op; --jit makes Keras wrap it in jax.jit (one XLA compile per worker, in the
# uncounted warm-up round). JAX's default matmul precision lets float32 matmuls use TF32 on the
# GPU's tensor cores, in the model and in the "float32" matmul peak alike.
#
# Prepare (once, on a machine with pip and a network; the GPU machine has neither keras nor
# keras-hub, and no network). Its image has Python 3.12, JAX 0.11 with CUDA, numpy, absl-py, rich,
# h5py, ml-dtypes, packaging, regex, tokenizers and typing-extensions; keras and keras-hub need
# these beside it (the other Requires-Dist of keras-hub 0.32.0, kagglehub, kagglesdk, sentencepiece
# and tensorflow-text, are not needed to import it or to build its layers). From the repo root:
#
#     echo /.whl/ >> .git/info/exclude
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#         --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#         --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
#         -d .whl keras==3.15.1 keras-hub==0.32.0 namex==0.1.0 optree==0.20.0
#
# (4 wheels, about 4.5 MB: keras, keras_hub and namex are pure Python, optree is cp312 manylinux.)
# Then, with the device tool:
#
#     run  command: "bash benchmarks/gpu.sh"   carry: [".whl"]   timeout_s: 480
#
# Not yet run on a GPU: the 5 minutes are an estimate (4 worker starts and XLA compiles, then
# 24 rounds of 30 steps, 4 of them warm-up). The log is written as it goes, so a run cut short
# still returns it; a second try can be made shorter with e.g. --rounds 3 --steps 20.
#
# It installs .whl/*.whl into $SITE (default /tmp/site), puts that and the repo root on
# PYTHONPATH (the package is not pip-installed), prints the GPU and JAX's devices, and writes
# $OUT/train_throughput_gpu.json and the log $OUT/train_throughput_gpu.log (OUT: the device tool's
# output folder there; benchmarks/results when unset).
#
# Elsewhere: PYTHON picks the interpreter (default python3). Without nvidia-smi the GPU check is
# skipped, so a CPU-only machine can run it end to end with small flags, e.g.
#     PYTHON=/tmp/jaxenv/bin/python SITE=/tmp/site_cpu bash benchmarks/gpu.sh \
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
