"""Tests of `benchmarks.language_models.against_keras_hub`: its FLOP and token counts, batches, flags, a smoke run.

Not of speed: the study measures that.
"""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import run_main

from benchmarks.harness import language_peers, machine
from benchmarks.harness import language_workload as workload
from benchmarks.language_models.against_keras_hub import __main__ as language_models

ROOT = Path(__file__).resolve().parents[1]

TINY = ["--preset", "tiny", "--vocab-size", "50", "--batch-size", "3", "--length", "8", "--batches", "2"]


@pytest.mark.parametrize("kind", workload.KINDS)
def test_flop_formula_counts_every_matmul_weight_of_both_libraries_models(kind):
    """6 FLOPs per matmul weight and token, plus attention; the same for ours and keras-hub's.

    With one-token rows the attention terms are 3 x 4 D per block; the rest must be 6 FLOPs
    (forward 2, backward 4) per matmul weight: every kernel of the built model (BERT's unused,
    frozen pooler excepted) and the tied `[V, D]` table that computes the logits.
    """
    config = workload.model_config(language_models.parse_args(TINY), kind)
    attention = 3 * config.num_blocks * 4 * config.d_model
    for name in workload.MODELS:
        model, _ = language_peers.build_model(name, config)
        kernels = sum(
            int(np.prod(w.shape))
            for w in model.weights
            if w.path.endswith("kernel") and len(w.shape) >= 2 and "pooled_dense" not in w.path
        )
        tied_logits = config.vocab_size * config.d_model
        assert workload.train_step_flops(config, 1, 1) == 6 * (kernels + tied_logits) + attention, name
    one = workload.train_step_flops(config, 1, 1)
    assert workload.train_step_flops(config, 3, 1) == 3 * one  # linear in the batch
    # Quadratic in length only through attention: 3 x 4 T^2 D per block.
    assert workload.train_step_flops(config, 1, 2) - 2 * one == 3 * config.num_blocks * 4 * 2 * config.d_model


def test_round_tokens_count_real_inputs_and_predicted_labels_cycling_the_batches():
    first = (np.array([[5, 6, 0], [7, 0, 0]]), np.array([[0, 6, 0], [0, 0, 0]]))  # 3 real, 1 predicted
    second = (np.array([[5, 6, 7], [7, 8, 9]]), np.array([[5, 6, 7], [7, 8, 9]]))  # 6 real, 6 predicted
    assert workload.round_tokens([first, second], 1) == (3, 1)
    assert workload.round_tokens([first, second], 3) == (3 + 6 + 3, 1 + 6 + 1)


def test_batches_are_the_same_in_every_process_and_look_as_described():
    args = language_models.parse_args(TINY)
    decoder = workload.decoder_batches(args)
    assert workload.checksum(decoder) == workload.checksum(workload.decoder_batches(args))
    for inputs, labels in decoder:
        assert inputs.shape == labels.shape == (3, 8) and inputs.dtype == labels.dtype == np.int32
        np.testing.assert_array_equal(inputs[:, 1:], labels[:, :-1])  # packed windows, shifted by one
        assert inputs.min() >= workload.FIRST_PIECE_ID and inputs.max() < 50  # no padding, no reserved id
    encoder = workload.encoder_batches(args)
    assert workload.checksum(encoder) == workload.checksum(workload.encoder_batches(args))
    assert workload.checksum(encoder) != workload.checksum(decoder)
    for inputs, labels in encoder:
        assert inputs.shape == labels.shape == (3, 8)
        lengths = np.count_nonzero(inputs, axis=1)
        assert np.all((lengths >= 4) & (lengths <= 8)) and np.all(inputs[:, 0] == 2)  # <s> first
        assert np.all(labels[inputs == 0] == 0)  # padding is never predicted
        assert np.all(labels[labels > 0] >= workload.FIRST_PIECE_ID)  # only pieces are


def test_flags_are_checked_and_every_flag_has_help(capsys):
    args = language_models.parse_args([])
    assert (args.preset, args.kinds, args.precision) == ("small", ["decoder", "encoder"], "auto")
    assert args.learned_positions is True and args.jit_compile is False and args.vocab_size == 8000
    assert args.out == ROOT / "benchmarks" / "language_models" / "against_keras_hub" / "results"
    assert language_models.parse_args(["--kinds", "encoder, decoder"]).kinds == ["decoder", "encoder"]
    for argv, message in (
        (["--kinds", "decoder,gpt"], "expected comma-separated values of decoder, encoder; got 'decoder,gpt'"),
        (["--length", "2"], "--length must be >= 3. Received: 2"),
        (["--new-tokens", "0"], "--new-tokens must be >= 1. Received: 0"),
        (["--vocab-size", "6"], "--vocab-size must be >= 7. Received: 6"),
        (["--batch-size", "0"], "batch_size"),
        (["--name", "../x"], "--name must be letters, digits, _ and -"),
    ):
        with pytest.raises(SystemExit):
            language_models.parse_args(argv)
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        language_models.parse_args(["--help"])
    assert exit_info.value.code == 0
    shown = capsys.readouterr().out
    for flag in ("--preset", "--steps", "--rounds", "--batch-size", "--length", "--new-tokens", "--out", "--name"):
        assert flag in shown
    assert "--worker" not in shown


@pytest.mark.slow
def test_smoke_run_writes_both_kinds_ratios_of_the_medians_and_the_cpu(tmp_path, capsys, monkeypatch):
    out = tmp_path / "language_models.json"
    argv = ["--preset", "tiny", "--vocab-size", "64", "--batch-size", "2", "--length", "8", "--prompt-length", "2"]
    argv += ["--new-tokens", "2", "--batches", "1", "--steps", "1", "--rounds", "1", "--warmup-rounds", "0"]
    argv += ["--peak-size", "64", "--out", str(tmp_path)]
    # The benchmark's two worker processes: the project importable from this checkout, TensorFlow quiet.
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    status, printed = run_main(language_models.main, argv, capsys)
    assert status == 0, printed[-3000:]
    assert machine.cpu_line(machine.cpu_info()) in printed.splitlines()
    written = json.loads(out.read_text())
    assert written["command"] == "python -m benchmarks.language_models.against_keras_hub " + " ".join(argv)
    assert written["cpu"] == machine.cpu_info() and written["cpu_count"] == os.cpu_count()
    precision = written["precision"]
    assert precision["requested"] == "auto" and precision["policy"] in ("float32", "mixed_bfloat16")
    assert {"keras", "tensorflow", "keras-hub"} <= set(written["versions"])
    for kind in ("decoder", "encoder"):
        results = written["training"][kind]
        medians = [results[name]["tokens_per_second_median"] for name in ("ours", "keras-hub")]
        assert min(medians) > 0 and results["ours_over_keras_hub"] == pytest.approx(medians[0] / medians[1])
        assert results["model_flops_per_step"] > 0
        assert results["ours"]["mfu_fp32_peak"] > 0 and results["ours"]["mfu_fp32_peak_cpu_time"] > 0
    generation = written["generation"]
    names = ("ours", "keras-hub", "keras-hub generate")
    speeds = {name: generation[name]["new_tokens_per_second_median"] for name in names}
    assert generation["ours_over_keras_hub"] == pytest.approx(speeds["ours"] / speeds["keras-hub"])
    assert generation["ours_over_keras_hub_generate"] == pytest.approx(speeds["ours"] / speeds["keras-hub generate"])
    for kind in ("decoder", "encoder"):
        results = written["training"][kind]
        cpu_medians = [results[name]["tokens_per_cpu_second_median"] for name in ("ours", "keras-hub")]
        assert results["ours_over_keras_hub_cpu_time"] == pytest.approx(cpu_medians[0] / cpu_medians[1])
    assert all(generation[name]["equal_to_uncached"] == 1.0 for name in speeds)  # both caches are right
