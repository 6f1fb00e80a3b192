"""Tests of the benchmark scripts' own arithmetic and plumbing (not of speed: the benchmarks
measure that). `benchmarks/` holds scripts, so its folder goes on `sys.path`."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from keras_transformer.config import preset
from keras_transformer.models import build_transformer

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import train_throughput  # noqa: E402


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_flop_formula_counts_every_matmul_weight_of_the_model(name):
    """With one-token sentences the attention terms are 4 D per token and block; the rest of
    the formula must be 6 FLOPs (forward 2, backward 4) per matmul weight of the built model:
    every Dense/Conv1D kernel except the embedding tables."""
    config = preset(name, source_vocab_size=50, target_vocab_size=40, max_source_len=8, max_target_len=8)
    model = build_transformer(config)
    matmul_weights = sum(
        int(np.prod(w.shape)) for w in model.weights if w.path.endswith("kernel") and len(w.shape) >= 2
    )
    attention = 3 * config.num_blocks * (4 * config.d_model + 8 * config.d_model)  # 4SD enc, 4TD + 4TSD dec
    assert train_throughput.train_step_flops(config, 1, 1, 1) == 6 * matmul_weights + attention
    # Batch-linear, and quadratic in length only through attention.
    assert train_throughput.train_step_flops(config, 3, 1, 1) == 3 * train_throughput.train_step_flops(config, 1, 1, 1)


def test_shared_part_holds_every_weight_of_our_model_outside_its_blocks():
    """The `shared` worker's step minus a model's step is that model's blocks only if the shared
    part trains the same weights as the model outside its blocks: both embeddings and the logits."""
    config = preset("tiny", source_vocab_size=50, target_vocab_size=40, max_source_len=8, max_target_len=8)
    outside_blocks = {
        (w.path, tuple(w.shape)) for w in build_transformer(config).weights if "_block_" not in w.path
    }
    shared = train_throughput.build_shared_part(config)
    assert {(w.path, tuple(w.shape)) for w in shared.weights} == outside_blocks
    logits_weights = config.d_model * config.target_vocab_size
    assert train_throughput.train_step_flops(config, 1, 1, 1, blocks=False) == 6 * logits_weights


def test_step_split_finds_the_block_time_a_target_ratio_needs():
    results = {name: {"step_ms_median": ms} for name, ms in (("shared", 100.0), ("ours", 190.0), ("keras-hub", 200.0))}
    split = train_throughput.step_split(results, target=1.25)
    assert split["ours_blocks_ms"] == 90.0 and split["keras_hub_blocks_ms"] == 100.0
    assert split["shared_fraction_of_keras_hub_step"] == 0.5
    assert split["ours_blocks_ms_needed_for_target"] == 60.0  # 100 + 60 = 200 / 1.25


def test_synthetic_batches_look_like_the_pipelines_and_are_the_same_for_every_worker():
    args = train_throughput.parse_args(["--batches", "3", "--batch-size", "5", "--length", "8", "--vocab", "30"])
    first, second = train_throughput.synthetic_batches(args), train_throughput.synthetic_batches(args)
    for ((source, target_in), target_out), ((source2, target_in2), target_out2) in zip(first, second):
        np.testing.assert_array_equal(source, source2)
        np.testing.assert_array_equal(target_out, target_out2)
        assert source.shape == target_in.shape == target_out.shape == (5, 8)
        assert np.all(target_in[:, 0] == 2)  # <s>
        lengths = np.count_nonzero(target_out, axis=1)
        assert np.all((lengths >= 4) & (lengths <= 8))
        assert np.all(target_out[np.arange(5), lengths - 1] == 3)  # </s> last
        np.testing.assert_array_equal(np.count_nonzero(target_in, axis=1), lengths)  # <s> + words
        words = target_out[:, :-1] > 3  # real tokens before the last position
        np.testing.assert_array_equal(target_in[:, 1:][words], target_out[:, :-1][words])  # shifted by one


@pytest.mark.slow
def test_benchmark_runs_both_models_and_writes_their_ratio(tmp_path):
    out = tmp_path / "throughput.json"
    command = [sys.executable, str(BENCHMARKS / "train_throughput.py"), "--preset", "tiny", "--vocab", "200"]
    command += ["--batch-size", "8", "--length", "8", "--steps", "2", "--rounds", "2", "--peak-size", "256"]
    command += ["--precision", "float32", "--bleu-epochs", "0", "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ours / keras-hub" in result.stdout
    results = json.loads(out.read_text())["precisions"]["float32"]
    for name in ("ours", "keras-hub"):
        assert len(results[name]["target_tokens_per_second_rounds"]) == 2
        assert results[name]["target_tokens_per_second_median"] > 0
        assert 0 < results[name]["mfu_fp32_peak"] < 1
    ratio = results["ours"]["target_tokens_per_second_median"] / results["keras-hub"]["target_tokens_per_second_median"]
    assert results["ours_over_keras_hub"] == pytest.approx(ratio)
