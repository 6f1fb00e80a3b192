#!/usr/bin/env bash
# The benchmarks on one GPU with the JAX backend of Keras, XLA-compiled, ours against keras-hub's:
#
#     bash benchmarks/gpu.sh                  # every job below, one after the other
#     bash benchmarks/gpu.sh train [FLAGS]    # one job; its study's flags override the defaults below
#
# The jobs, each writing gpu_JOB.json (the study's --name gpu_JOB) and gpu_JOB.log in its study's results/
# folder (benchmarks/speed/<study>/results), or in $OUT when it is set:
#   train   python -m benchmarks.speed.train_throughput, the encoder-decoder Transformers, base
#           preset, V 8000, lengths 64, 256 and 1,024 at 16,384 tokens per step (batches 256, 64
#           and 16), mixed_bfloat16 and float32: tokens/s, MFU against the measured matmul peaks,
#           peak device memory
#   lm      the same sweep with --task lm: our decoder-only LM against keras-hub's GPT2Backbone
#   decode  python -m benchmarks.speed.decode: cached greedy and beam-4 decoding of 64 sentences,
#           the greedy ones against keras-hub's GreedySampler, and single-sentence latency, greedy
#           and beam 4, against keras-hub's GreedySampler and BeamSampler (CTranslate2 is
#           left out, --ctranslate2 false: it is the CPU study's peer; append --ctranslate2 true to add it)
#   profile python -m benchmarks.speed.step_breakdown: where a training step's time goes at
#           lengths 64, 256 and 1,024 (the step against its parts, each timed alone), and a JAX
#           profiler trace of it
#           (the default variant drops out attention weights, so its training never fuses attention;
#           `profile --attention-dropout-rate 0 --name gpu_profile_fused` shows the fused
#           kernels, and counts them: none where "auto" chose them would be a silent fallback)
# Each train or lm length starts 2 workers per precision (4 XLA compiles per length), so one job
# takes several minutes; give a short run e.g. --rounds 2 --steps 10.
#
# The layers are backend-neutral (keras.ops only), so the same model trains under JAX; only the
# benchmark's data feed differs (a Python generator instead of tf.data) and the BLEU part, which
# needs TensorFlow, is off (--bleu-epochs 0). Under JAX, compile(jit_compile=False) runs the train
# step eagerly, op by op; --jit-compile true makes Keras wrap it in jax.jit (one XLA compile per
# worker, in the uncounted warm-up round). JAX's default matmul precision lets float32 matmuls use
# TF32 on the GPU's tensor cores, in the model and in the "float32" matmul peak alike.
#
# What it needs: a Python with JAX for CUDA (e.g. pip install "jax[cuda12]") and numpy, and in
# it, or beside it, keras and keras-hub. TensorFlow is not needed, and this package is not
# installed: the script runs the studies as `python -m benchmarks.speed.<study>` from the
# repository root, which it puts on PYTHONPATH. Either
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
#   OUT     one folder for every job's results (default: each study's own results/ folder)
#
# The flags after a job's name are its study's: they are passed on after the defaults below, so
# any of them overrides a default (see each study's --help, e.g. python -m benchmarks.speed.decode --help).
#
# It prints the GPU (nvidia-smi -L), the Python, JAX, its devices and the Keras and keras-hub
# versions, and stops if nvidia-smi sees a GPU but JAX's default backend is not the GPU. Each
# job's log holds everything it printed, written as it goes, so a run cut short still leaves it;
# its JSON has the results, the CPU model and flags and the versions.
#
# Without nvidia-smi the GPU check is skipped, so a CPU-only machine with JAX can run it end to
# end with small flags, e.g.
#     PYTHON=/path/to/python-with-jax SITE=/tmp/site_cpu bash benchmarks/gpu.sh lm \
#         --preset tiny --length 24 48 --tokens-per-step 96 --rounds 2 --steps 3 --peak-size 512
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD
PYTHON=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}
OUT=${OUT:-}

# The folder of a job's JSON, log and trace: $OUT, or its study's results/ folder.
job_out() {
    if [ -n "$OUT" ]; then
        echo "$OUT"
        return
    fi
    case "$1" in
        train | lm) echo "$REPO/benchmarks/speed/train_throughput/results" ;;
        decode) echo "$REPO/benchmarks/speed/decode/results" ;;
        profile) echo "$REPO/benchmarks/speed/step_breakdown/results" ;;
    esac
}

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

JOBS=(train lm decode profile)
if [ $# -gt 0 ]; then
    case " ${JOBS[*]} " in
        *" $1 "*) JOBS=("$1"); shift ;;
        *) echo "gpu.sh: the first argument must be a job, one of: ${JOBS[*]} (received: $1)" >&2; exit 2 ;;
    esac
fi
SWEEP=(--jit-compile true --precision mixed_bfloat16 float32 --bleu-epochs 0 --preset base --vocab-size 8000
       --length 64 256 1024 --tokens-per-step 16384 --steps 30 --rounds 5 --warmup-rounds 1 --peak-size 8192)

run_job() {
    local job=$1 out
    shift
    out=$(job_out "$job")
    case "$job" in
        train) "$PYTHON" -m benchmarks.speed.train_throughput "${SWEEP[@]}" --out "$out" --name gpu_train "$@" ;;
        lm) "$PYTHON" -m benchmarks.speed.train_throughput --task lm "${SWEEP[@]}" --out "$out" --name gpu_lm "$@" ;;
        decode) "$PYTHON" -m benchmarks.speed.decode --jit-compile true --preset base --vocab-size 8000 \
            --batch-size 64 --source-len 32 --output-tokens 64 --repeats 5 --latency-requests 50 \
            --ctranslate2 false --out "$out" --name gpu_decode "$@" ;;
        profile) "$PYTHON" -m benchmarks.speed.step_breakdown --preset base --vocab-size 8000 \
            --length 64 256 1024 --tokens-per-step 16384 --precision mixed_bfloat16 --trace "$out/gpu_profile_trace" \
            --out "$out" --name gpu_profile "$@" ;;
    esac
}

for job in "${JOBS[@]}"; do
    mkdir -p "$(job_out "$job")"
    {
        echo "== benchmarks/gpu.sh $job $* ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs)"
        if [ "$GPU_EXPECTED" = 1 ]; then
            nvidia-smi -L
        else
            echo "nvidia-smi: not found, GPU check skipped"
        fi
        "$PYTHON" - <<'EOF'
import os
import sys

from importlib.metadata import version

import jax
import keras

# keras-hub's version from its metadata: importing it here would import TensorFlow where one is installed.
print(f"python {sys.version.split()[0]}, jax {jax.__version__}, devices {jax.devices()}")
print(f"keras {keras.__version__} (backend {keras.backend.backend()}), keras-hub {version('keras-hub')}")
if os.environ["GPU_EXPECTED"] == "1" and jax.default_backend() != "gpu":
    sys.exit(f"nvidia-smi sees a GPU but JAX's default backend is {jax.default_backend()!r}: stopping")
EOF
        SECONDS=0
        run_job "$job" "$@"
        echo "== $job took ${SECONDS} s"
    } 2>&1 | tee "$(job_out "$job")/gpu_$job.log"
done
