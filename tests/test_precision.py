"""Tests of `--precision auto`: the choice for a machine, its record, and resumed runs keeping it.

The machines are described by /proc/cpuinfo texts and accelerator lists written here, so every
case runs on any machine; one test compares the real machine's choice with a finished run's.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY_MODEL, tiny_train_config

from keras_transformer import runs
from keras_transformer.cli import main
from keras_transformer.config import PRECISIONS, TrainConfig
from keras_transformer.precision import (
    PrecisionChoice,
    choose_precision,
    cpu_info,
    parse_cpuinfo,
    visible_accelerators,
)

AMD_AVX2 = parse_cpuinfo(
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n"
    "flags\t\t: fpu sse2 avx avx2 fma bmi2 sha_ni\n"
)
INTEL_AMX = parse_cpuinfo(
    "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8481C\n"
    "flags\t\t: fpu avx avx2 fma avx512f avx512_bf16 avx512_fp16 amx_tile amx_bf16\n"
)
AVX512_BF16 = parse_cpuinfo("model name\t: AMD EPYC 9B14\nflags\t\t: avx avx2 fma avx512f avx512_bf16\n")
AMX_ONLY = parse_cpuinfo("model name\t: an AMX CPU\nflags\t\t: avx2 amx_tile amx_bf16\n")


def gpu(capability, name="a GPU"):
    return {"kind": "GPU", "name": name, "compute_capability": capability}


A100, T4 = gpu([8, 0], "NVIDIA A100"), gpu([7, 5], "Tesla T4")
TPU = {"kind": "TPU", "name": "/physical_device:TPU:0", "compute_capability": None}


# ---------------------------------------------------------------- the choice


@pytest.mark.parametrize(
    "cpu, policy, reason",
    [
        (AMD_AVX2, "float32", "the CPU has no avx512_bf16/amx_bf16 (AMD EPYC 7B13)"),
        (INTEL_AMX, "mixed_bfloat16", "the CPU has avx512_bf16/amx_bf16 (Intel(R) Xeon(R) Platinum 8481C)"),
        (AVX512_BF16, "mixed_bfloat16", "the CPU has avx512_bf16 (AMD EPYC 9B14)"),
        (AMX_ONLY, "mixed_bfloat16", "the CPU has amx_bf16 (an AMX CPU)"),
        ({"model": None, "flags": []}, "float32", "the CPU has no avx512_bf16/amx_bf16 (unknown model)"),
    ],
    ids=["amd-avx2", "intel-amx", "avx512-bf16", "amx-bf16", "nothing-known"],
)
def test_auto_on_a_cpu_is_mixed_bfloat16_only_with_native_bfloat16_flags(cpu, policy, reason):
    assert choose_precision("auto", cpu, accelerators=[]) == PrecisionChoice("auto", policy, reason)


@pytest.mark.parametrize(
    "accelerators, cpu, policy, reason",
    [
        ([A100], AMD_AVX2, "mixed_bfloat16", "the GPU of compute capability 8.0 computes bfloat16 natively"),
        ([gpu([9, 0]), gpu([9, 0])], AMD_AVX2, "mixed_bfloat16", "2 GPUs of compute capability 9.0 compute"),
        ([T4], INTEL_AMX, "float32", "the GPU has compute capability 7.5, below the 8.0 bfloat16 needs (Tesla T4)"),
        ([A100, T4], INTEL_AMX, "float32", "compute capability 7.5, below the 8.0"),
        ([gpu(None)], INTEL_AMX, "float32", "the GPU's compute capability is unknown"),
        ([TPU], AMD_AVX2, "mixed_bfloat16", "the TPU computes bfloat16 natively"),
    ],
    ids=["a100", "two-h100", "t4", "a100-and-t4", "unknown-gpu", "tpu"],
)
def test_a_visible_gpu_or_tpu_decides_instead_of_the_cpu(accelerators, cpu, policy, reason):
    choice = choose_precision("auto", cpu, accelerators)
    assert (choice.policy, choice.warning) == (policy, None)
    assert reason in choice.reason


@pytest.mark.parametrize(
    "requested, cpu, accelerators, warned",
    [
        ("mixed_bfloat16", AMD_AVX2, [], True),
        ("mixed_bfloat16", INTEL_AMX, [], False),
        ("mixed_bfloat16", AMD_AVX2, [A100], False),
        ("mixed_bfloat16", INTEL_AMX, [T4], True),
        ("mixed_float16", AMD_AVX2, [], True),
        ("mixed_float16", INTEL_AMX, [], False),  # avx512_fp16
        ("mixed_float16", AMD_AVX2, [T4], False),
        ("float32", AMD_AVX2, [], False),
    ],
)
def test_an_explicit_policy_is_kept_and_warned_about_where_it_is_emulated(requested, cpu, accelerators, warned):
    choice = choose_precision(requested, cpu, accelerators)
    assert (choice.requested, choice.policy, choice.reason) == (requested, requested, "requested")
    assert (choice.warning is not None) == warned
    if warned:
        assert choice.warning.startswith(f"warning: {requested}, but ")
        assert "slower than in float32" in choice.warning and "\n" not in choice.warning


def test_the_warning_of_mixed_bfloat16_on_an_avx2_cpu_names_the_cpu_and_what_auto_would_do():
    choice = choose_precision("mixed_bfloat16", AMD_AVX2, [])
    assert choice.warning == (
        "warning: mixed_bfloat16, but the CPU has no avx512_bf16/amx_bf16 (AMD EPYC 7B13): bfloat16 is not native "
        "here, so this run will be slower than in float32, on a CPU many times slower (auto would choose float32)"
    )
    assert choice.describe() == "mixed_bfloat16 (requested)"
    assert choose_precision("auto", AMD_AVX2, []).describe() == (
        "float32 (auto: the CPU has no avx512_bf16/amx_bf16 (AMD EPYC 7B13))"
    )
    assert "warning" not in choose_precision("auto", AMD_AVX2, []).to_dict()


def test_cpu_info_reads_the_file_it_is_given(tmp_path):
    (tmp_path / "cpuinfo").write_text("model name\t: AMD EPYC 7B13\nflags\t\t: fma avx2 avx\n")
    assert cpu_info(tmp_path / "cpuinfo") == {"model": "AMD EPYC 7B13", "id": None, "flags": ["avx", "avx2", "fma"]}


def test_this_machines_choice_is_made_from_its_cpuinfo_and_visible_accelerators():
    accelerators = visible_accelerators()
    assert all(device["kind"] in ("GPU", "TPU") and device["name"] for device in accelerators)
    assert choose_precision("auto") == choose_precision("auto", cpu_info(), accelerators)


def test_the_precision_module_imports_no_backend():
    code = (
        "import sys; sys.modules['tensorflow'] = None\n"
        "from keras_transformer.precision import choose_precision\n"
        "assert 'keras' not in sys.modules and 'jax' not in sys.modules and 'torch' not in sys.modules\n"
        "print(choose_precision('auto', {'model': 'x', 'flags': ['amx_bf16']}, []).policy)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "mixed_bfloat16\n", result.stderr[-2000:]


# ---------------------------------------------------------------- the config and the command line


def test_auto_is_the_default_precision_of_the_config_and_of_train_help(capsys):
    assert PRECISIONS[0] == "auto" and TrainConfig().precision == "auto"
    with pytest.raises(ValueError, match="`precision` must be one of .*Received: precision='bfloat16'"):
        TrainConfig(precision="bfloat16").validate()
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--precision {auto,float32,mixed_bfloat16,mixed_float16}" in help_text
    assert "or auto: mixed_bfloat16 where the hardware computes bfloat16 natively" in help_text
    assert "(default: 'auto')" in help_text.split("--precision {")[-1].split("--jit-compile")[0]


# ---------------------------------------------------------------- the run's record


def test_a_finished_run_records_the_choice_and_the_machine_in_its_summary(trained_run):
    train_config, summary = trained_run  # the shared tiny run asks for float32 (auto: see the next test)
    assert summary["precision"] == {"requested": "float32", "policy": "float32", "reason": "requested"}
    assert summary["machine"]["cpu"] == cpu_info() and summary["machine"]["accelerators"] == visible_accelerators()
    assert summary["train_config"]["precision"] == "float32"
    # TensorFlow's threads as this test process runs (`python train.py` sets them: test_threads.py).
    from keras_transformer.training import threads

    assert summary["machine"]["tensorflow_threads"] == threads.settings(train_config)


def test_a_new_run_logs_its_precision_and_saves_the_policy(tmp_path):
    lines = []
    config = tiny_train_config(tmp_path, precision="auto")
    train_config, _ = runs.prepare_run(config, dict(TINY_MODEL), log=lines.append)
    expected = choose_precision("auto")
    assert train_config.precision == expected.policy
    assert lines == [f"Precision: {expected.describe()}"]
    assert TrainConfig.load(tmp_path / "run" / runs.TRAIN_CONFIG_FILE).precision == expected.policy


def test_an_explicit_mixed_bfloat16_run_without_native_bfloat16_logs_one_warning(tmp_path):
    config = tiny_train_config(tmp_path, precision="mixed_bfloat16")
    precision = runs.settle_precision(config, cpu=AMD_AVX2, accelerators=[])
    lines = []
    train_config, _ = runs.prepare_run(config, dict(TINY_MODEL), log=lines.append, precision=precision)
    assert train_config.precision == "mixed_bfloat16"
    assert lines == ["Precision: mixed_bfloat16 (requested)", precision.warning]


# ---------------------------------------------------------------- resuming


def start_run_on(cpu, root):
    """A run directory started with `--precision auto` on a machine with `cpu` and no GPU."""
    config = tiny_train_config(root, precision="auto")
    precision = runs.settle_precision(config, cpu=cpu, accelerators=[])
    runs.prepare_run(config, dict(TINY_MODEL), log=lambda line: None, precision=precision)
    return config


def test_a_run_started_with_auto_keeps_its_policy_when_resumed_on_another_machine(tmp_path):
    config = start_run_on(INTEL_AMX, tmp_path)  # auto chose mixed_bfloat16 there
    precision = runs.settle_precision(config, resume=True, cpu=AMD_AVX2, accelerators=[])
    assert (precision.requested, precision.policy) == ("auto", "mixed_bfloat16")
    assert precision.reason == (
        "the run's, kept on resume; auto would choose float32 here: the CPU has no avx512_bf16/amx_bf16 (AMD EPYC 7B13)"
    )
    assert precision.warning.startswith("warning: mixed_bfloat16, but the CPU has no avx512_bf16/amx_bf16")
    lines = []
    resumed, _ = runs.prepare_run(config, dict(TINY_MODEL), resume=True, log=lines.append, precision=precision)
    assert resumed.precision == "mixed_bfloat16"
    assert lines[1:] == [f"Precision: {precision.describe()}", precision.warning]
    # Back on a machine with native bfloat16, the same resume is quiet.
    assert runs.settle_precision(config, resume=True, cpu=INTEL_AMX, accelerators=[]).warning is None


def test_resuming_with_another_explicit_precision_is_refused(tmp_path):
    config = start_run_on(INTEL_AMX, tmp_path)
    float32 = tiny_train_config(tmp_path, precision="float32")
    with pytest.raises(runs.RunError, match="Cannot change precision when resuming"):
        runs.prepare_run(float32, dict(TINY_MODEL), resume=True, log=lambda line: None)
    assert TrainConfig.load(Path(config.run_dir) / runs.TRAIN_CONFIG_FILE).precision == "mixed_bfloat16"


@pytest.mark.parametrize("flags", [[], ["--precision", "auto"], ["--precision", "mixed_bfloat16"]])
def test_train_resume_keeps_the_runs_precision(flags, tmp_path, monkeypatch):
    config = start_run_on(INTEL_AMX, tmp_path)
    settled = []

    def prepare_only(train_config, model_overrides=None, resume=False, **kwargs):
        settled.append(runs.prepare_run(train_config, model_overrides, resume, log=lambda line: None)[0])
        return {"test": {"exact_match": 0.5, "bleu": 12.3}, "total_seconds": 1.0, "export_path": "nowhere"}

    monkeypatch.setattr(runs, "train", prepare_only)
    assert main(["train", "--resume", "--run-dir", config.run_dir, *flags]) == 0
    assert settled[0].precision == "mixed_bfloat16"


def test_a_saved_config_that_says_auto_is_settled_on_resume(tmp_path):
    config = start_run_on(AMD_AVX2, tmp_path)
    path = Path(config.run_dir) / runs.TRAIN_CONFIG_FILE
    path.write_text(json.dumps({**json.loads(path.read_text()), "precision": "auto"}))
    resumed, _ = runs.prepare_run(config, dict(TINY_MODEL), resume=True, log=lambda line: None)
    assert resumed.precision == choose_precision("auto").policy
