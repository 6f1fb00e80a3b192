"""benchmarks.speed.step_breakdown: reading XLA's optimized HLO and the profiler's op times into a breakdown.

The run under JAX (a trace, the dump) is tested end to end through `benchmarks/gpu.sh profile` in
test_benchmarks.py; here, its parts on known inputs, and runs under TensorFlow (with its default
threads, and in training towers as train.py runs it).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.speed.step_breakdown import __main__ as step_breakdown
from benchmarks.speed.step_breakdown.breakdown import breakdown
from benchmarks.speed.step_breakdown.hlo import parse_hlo
from benchmarks.speed.step_breakdown.parts import part_of, phase_of

ROOT = Path(__file__).resolve().parents[1]

HLO = """HloModule jit_train_step, is_scheduled=true

%fused_computation.1 (param_0: f32[4,8], param_1: f32[8,8]) -> f32[4,8] {
  %param_0 = f32[4,8]{1,0} parameter(0)
  %param_1 = f32[8,8]{1,0} parameter(1)
  ROOT %dot.3 = f32[4,8]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%outer_computation (param_0.1: f32[4,8], param_1.1: f32[8,8]) -> f32[4,8] {
  %param_0.1 = f32[4,8]{1,0} parameter(0)
  %param_1.1 = f32[8,8]{1,0} parameter(1)
  ROOT %inner_fusion = f32[4,8]{1,0} fusion(%param_0.1, %param_1.1), kind=kOutput, calls=%fused_computation.1
}

%fused_computation.2 (param_0.2: f32[4,8]) -> f32[4,8] {
  %param_0.2 = f32[4,8]{1,0} parameter(0)
  ROOT %exponential.1 = f32[4,8]{1,0} exponential(%param_0.2)
}

ENTRY %main.9 (a: f32[4,8], b: f32[8,8]) -> (f32[4,8], f32[4,8]) {
  %a = f32[4,8]{1,0} parameter(0)
  %b = f32[8,8]{1,0} parameter(1)
  %matmul_fusion = f32[4,8]{1,0} fusion(%a, %b), kind=kCustom, calls=%outer_computation, FEED_FORWARD
  %softmax_fusion = f32[4,8]{1,0} fusion(%matmul_fusion), kind=kLoop, calls=%fused_computation.2, SELF_ATTENTION
  %fmha = (f32[4,8]{1,0}, u8[0]{0}) custom-call(%a, %b), custom_call_target="__cudnn$fmhaSoftmax", CROSS_ATTENTION
  %copy.2 = f32[4,8]{1,0} copy(%a), metadata={op_name="jit(train_step)/averaging_adam/add"}
  ROOT %tuple = (f32[4,8]{1,0}, f32[4,8]{1,0}) tuple(%softmax_fusion, %copy.2)
}
"""
for placeholder, path in {
    "FEED_FORWARD": 'jvp(encoder_block_0)/feed_forward/dot_general" stack_frame_id="3',
    "SELF_ATTENTION": "transpose(jvp(decoder_block_1))/self_attention/exp",
    "CROSS_ATTENTION": "jvp(decoder_block_0)/cross_attention/dot_product_attention",
}.items():
    HLO = HLO.replace(placeholder, f'metadata={{op_name="jit(train_step)/{path}"}}')


def test_ops_are_typed_by_what_they_run_through_nested_fusions_and_library_calls():
    instructions = parse_hlo(HLO)
    assert instructions["matmul_fusion"] == {
        "opcode": "fusion",
        "op_name": "jit(train_step)/jvp(encoder_block_0)/feed_forward/dot_general",
        "kind": "matmul",  # its dot is two computations down
    }
    assert instructions["softmax_fusion"]["kind"] == "other"
    assert instructions["fmha"]["kind"] == "attention kernel"
    assert instructions["fmha"]["opcode"] == "custom-call:__cudnn$fmhaSoftmax"
    assert instructions["copy.2"]["kind"] == "other" and instructions["dot.3"]["kind"] == "matmul"
    assert instructions["tuple"]["op_name"] == ""


def test_an_ops_path_names_its_phase_and_its_part_of_the_model():
    cases = {
        "jit(train_step)/jvp(encoder_block_0)/self_attention/scoring/dot_general": (
            "forward",
            "attention core: encoder self",
        ),
        "jit(train_step)/transpose(jvp(decoder_block_1))/self_attention/div": (
            "backward",
            "attention core: decoder self (causal)",
        ),
        "jit(train_step)/jvp(decoder_block_0)/cross_attention/key_dense/dot_general": (
            "forward",
            "attention projections",
        ),
        "jit(train_step)/transpose(jvp(decoder_block_0))/cross_attention/layer_norm/mul": ("backward", "layer norm"),
        "jit(train_step)/transpose(jvp(decoder_block_0))/cross_attention/softmax": (
            "backward",
            "attention core: cross",
        ),
        "jit(train_step)/jvp(encoder_block_1)/feed_forward/dot_general": ("forward", "feed-forward"),
        "jit(train_step)/transpose(jvp(block_1))/self_attention/softmax": (
            "backward",
            "attention core: self (causal, decoder-only LM)",
        ),
        "jit(train_step)/jvp(encoder_block_1)/feed_forward/dropout/mul": ("forward", "dropout"),
        "jit(train_step)/jvp(target_positions)/mul": ("forward", "embeddings"),
        "jit(train_step)/transpose(jvp(logits))/transpose": ("backward", "logits and loss"),
        "jit(train_step)/jvp(compile_loss)/masked_label_smoothed_loss/reduce_sum": ("forward", "logits and loss"),
        "jit(train_step)/averaging_adam/sqrt": ("update", "optimizer"),
        # TensorFlow's paths: Grappler's rewrites are not the training's optimizer.
        "StatefulPartitionedCall/averaging_adam/ResourceApplyAdam_87": ("update", "optimizer"),
        "StatefulPartitionedCall/gradient_tape/logits_and_loss/ArithmeticOptimizer/FoldTransposeIntoMatMul_MatMul": (
            "other",
            "logits and loss",
        ),
        "jit(train_step)/reduce": ("other", "other"),
        "": ("other", "other"),
    }
    for op_name, expected in cases.items():
        assert (phase_of(op_name), part_of(op_name)) == expected, op_name


def test_the_breakdown_divides_by_the_steps_and_splits_the_busy_time_three_ways():
    modules = {7: parse_hlo(HLO), 3: {}}
    op_times = {  # nanoseconds over 2 traced steps
        (7, "matmul_fusion"): 6e6,
        (7, "softmax_fusion"): 2e6,
        (7, "copy.2"): 1e6,
        (None, "fmha"): 1e6,  # no program id: looked up in the newest module
        (7, "unknown.1"): 2e6,  # not in the dump: other
    }
    result = breakdown(op_times, modules, steps=2, top=2)
    assert result["busy_ms_per_step"] == 6.0
    assert result["fused_attention_ops"] == 1  # the cuDNN call: the fused path really ran
    assert result["ms_by_kind"] == {"matmul": 3.0, "other": 2.5, "attention kernel": 0.5}
    assert result["ms_by_phase"] == {"forward": 3.5, "other": 1.0, "backward": 1.0, "update": 0.5}
    assert result["ms_by_part"]["feed-forward"] == 3.0 and result["ms_by_part"]["optimizer"] == 0.5
    assert result["ms_by_part"]["attention core: cross"] == 0.5
    assert sum(result["ms_by_part"].values()) == 6.0
    assert [op["op"] for op in result["top_ops"]] == ["matmul_fusion", "softmax_fusion"]
    assert result["top_ops"][0]["ms_per_step"] == 3.0 and result["top_ops"][0]["kind"] == "matmul"


def test_tensorflows_step_is_broken_down_by_its_ops_names_and_types(tmp_path, capsys):
    """Under TensorFlow (this suite's backend): the executor's ops, by the scopes of their layers."""
    out = tmp_path / "breakdown.json"
    argv = ["--preset", "tiny", "--vocab-size", "60", "--length", "8", "--tokens-per-step", "64", "--steps", "2"]
    argv += ["--rounds", "1", "--trace-steps", "2", "--peak-size", "64", "--trace", str(tmp_path / "trace")]
    argv += ["--threads", "default"]  # towers would set this test process's threads (see the test below)
    flags = os.environ.get("XLA_FLAGS")
    assert step_breakdown.main([*argv, "--out", str(tmp_path), "--name", "breakdown"]) == 0
    assert os.environ.get("XLA_FLAGS") == flags  # the dump it set is not left to the rest of the process
    [point] = json.loads(out.read_text())["lengths"]
    assert point["device"] == "cpu" and point["busy_ms_per_step"] > 0
    assert sum(point["ms_by_part"].values()) == pytest.approx(point["busy_ms_per_step"])
    assert {"forward", "backward", "update"} <= set(point["ms_by_phase"])
    assert point["ms_by_kind"]["matmul"] > 0
    # The packed step's logits, loss and their gradients are named; the executor's own spans are not ops.
    assert {"logits and loss", "feed-forward", "attention projections", "optimizer"} <= set(point["ms_by_part"])
    assert not any("::" in op["op"] for op in point["top_ops"])
    assert "busy ms per step" in capsys.readouterr().out


def test_tensorflows_step_is_broken_down_in_towers_as_train_py_runs_it(tmp_path):
    """In a process of its own: one training tower per core where `configure_cpu_threads` applies."""
    from keras_transformer.training import threads

    out = tmp_path / "breakdown.json"
    argv = ["--preset", "tiny", "--vocab-size", "60", "--length", "8", "--tokens-per-step", "64", "--steps", "2"]
    argv += ["--rounds", "1", "--trace-steps", "2", "--peak-size", "64", "--out", str(tmp_path), "--name", "breakdown"]
    env = {k: v for k, v in os.environ.items() if k not in threads.THREAD_VARIABLES}
    process = subprocess.run(
        [sys.executable, "-m", "benchmarks.speed.step_breakdown", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    [point] = json.loads(out.read_text())["lengths"]
    cores = threads.available_cores()
    assert point["towers"] == (cores if 2 <= cores <= threads.MAX_TOWERS else 1)
    assert point["ms_by_kind"]["matmul"] > 0 and "logits and loss" in point["ms_by_part"]
