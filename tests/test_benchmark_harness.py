"""Tests of the benchmarks' harness: machine records, results files, flags, workers.

Not of speed: the studies measure that.
"""

import argparse
import importlib
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks.harness import cluttered, fit_timing, flags, machine, results, timing, vision_training, workers
from keras_transformer.config import ModelConfig, TrainConfig

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- benchmarks/harness

X86_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
stepping\t: 8
flags\t\t: fpu sse2 avx2 avx fma avx512f amx_bf16 avx512_bf16 amx_tile

processor\t: 1
model name\t: another model
flags\t\t: fpu
"""
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd sve bf16
CPU implementer\t: 0x41
"""


def test_cpuinfo_gives_the_first_processors_model_and_sorted_flags():
    assert machine.parse_cpuinfo(X86_CPUINFO) == {
        "model": "Intel(R) Xeon(R) Platinum 8480+",
        "id": "family 6 model 143 stepping 8",
        "flags": ["amx_bf16", "amx_tile", "avx", "avx2", "avx512_bf16", "avx512f", "fma", "fpu", "sse2"],
    }
    assert machine.parse_cpuinfo(ARM_CPUINFO) == {"model": None, "id": None, "flags": ["asimd", "bf16", "fp", "sve"]}


def test_cpu_info_without_a_cpuinfo_file_names_the_processor_from_platform(tmp_path):
    cpu = machine.cpu_info(tmp_path / "no_cpuinfo")
    assert cpu["flags"] == [] and cpu["model"] == (platform.processor() or platform.machine() or None)
    (tmp_path / "cpuinfo").write_text(ARM_CPUINFO)
    assert machine.cpu_info(tmp_path / "cpuinfo")["model"] == (platform.processor() or platform.machine() or None)


def test_cpu_line_names_the_model_and_the_matmul_flags_it_has():
    cpu = machine.parse_cpuinfo(X86_CPUINFO)
    assert machine.cpu_line(cpu) == (
        "CPU Intel(R) Xeon(R) Platinum 8480+ (family 6 model 143 stepping 8); matmul flags: avx avx2 fma avx512f "
        "avx512_bf16 amx_tile amx_bf16 (all 9 flags in the JSON)"
    )
    assert machine.cpu_line({"model": None, "flags": ["fpu"]}).startswith("CPU unknown; matmul flags: none of avx ")


def test_results_json_records_the_cpu_model_and_flags(tmp_path):
    cpu = machine.parse_cpuinfo(X86_CPUINFO)
    path = results.write_json(tmp_path / "new" / "folder" / "results.json", {"a": 1, **machine.machine(cpu)})
    assert path.read_text().endswith("}\n")
    assert json.loads(path.read_text()) == {"a": 1, "cpu_count": os.cpu_count(), "cpu": cpu}
    here = machine.machine()  # this machine's, read from /proc/cpuinfo where there is one
    assert here["cpu"] == machine.cpu_info() and here["cpu"]["model"]


def test_package_versions_come_from_the_installed_distributions_and_skip_missing_ones():
    versions = machine.package_versions({"numpy": "numpy", "keras_hub": "keras-hub", "absent": "no-such-dist-xyz"})
    assert versions == {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "keras_hub": importlib.import_module("keras_hub").__version__,
    }


def test_ratios_print_with_two_decimals_right_aligned():
    assert results.format_ratio(0.9349) == "0.93x"
    assert results.format_ratio(12.0, width=18) == " " * 12 + "12.00x"
    both = {"ours": {"train": {"steps": 30}}, "keras-hub": {"train": {"steps": 20}}}
    assert results.ours_over_keras_hub(both, "train", "steps") == 1.5


def test_json_lines_worker_skips_chatter_and_reports_a_worker_that_dies():
    script = (
        "import json, sys\n"
        "print('library chatter', flush=True)\n"
        "print(json.dumps({'ready': True}), flush=True)\n"
        "for line in sys.stdin:\n"
        "    if line.strip() != 'round':\n"
        "        sys.exit(3)\n"
        "    print(json.dumps({'echo': line.strip()}), flush=True)\n"
    )
    worker = workers.JsonLinesWorker([sys.executable, "-c", script], "echo")
    try:
        assert worker.answer() == {"ready": True}
        assert worker.request("round") == {"echo": "round"}
        with pytest.raises(RuntimeError, match="worker echo exited with status 3 before answering"):
            worker.request("stop")
    finally:
        worker.close()


def test_config_flags_have_the_fields_names_and_are_checked_by_the_configs_validate(capsys):
    parser = argparse.ArgumentParser()
    flags.add_config_flags(
        parser, TrainConfig, "training", fields=("warmup_steps", "jit_compile"), defaults={"warmup_steps": 33}
    )
    flags.add_config_flags(parser, ModelConfig, "model", fields=("d_model", "num_heads"))
    args = parser.parse_args(["--jit-compile", "true", "--d-model", "16", "--num-heads", "4"])
    assert (args.warmup_steps, args.jit_compile) == (33, True)
    assert "--warmup-steps WARMUP_STEPS" in parser.format_help() and "(default: 33)" in parser.format_help()
    assert flags.config_from_flags(parser, args, TrainConfig).warmup_steps == 33
    assert flags.config_from_flags(parser, args, ModelConfig, d_ff=8).d_ff == 8
    with pytest.raises(SystemExit):
        flags.config_from_flags(parser, parser.parse_args(["--d-model", "10", "--num-heads", "4"]), ModelConfig)
    assert "d_model" in capsys.readouterr().err
    with pytest.raises(ValueError, match="fields of TrainConfig"):
        flags.add_config_flags(argparse.ArgumentParser(), TrainConfig, "t", fields=("warmup",))


def test_output_flags_default_to_the_studys_results_folder_and_take_only_file_stems(capsys):
    parser = argparse.ArgumentParser()
    flags.add_output_flags(parser, "benchmarks.speed.decode", "decode")
    args = parser.parse_args([])
    assert args.out == ROOT / "benchmarks" / "speed" / "decode" / "results" and args.name == "decode"
    assert flags.output_path(args) == args.out / "decode.json"
    assert flags.output_path(args, ".png", extra="_maps") == args.out / "decode_maps.png"
    flags.check_name(parser, parser.parse_args(["--name", "run_2-b"]))
    with pytest.raises(SystemExit):
        flags.check_name(parser, parser.parse_args(["--name", "../elsewhere"]))
    assert "--name must be letters" in capsys.readouterr().err


def test_a_study_is_recorded_and_rerun_as_python_dash_m():
    assert results.command_line("benchmarks.speed.decode", ["--preset", "tiny"]) == (
        "python -m benchmarks.speed.decode --preset tiny"
    )
    command = workers.worker_command("benchmarks.speed.decode", ["--preset", "tiny"], "--worker", "ours")
    assert command == [sys.executable, "-m", "benchmarks.speed.decode", "--preset", "tiny", "--worker", "ours"]


def test_record_header_holds_the_settings_command_machine_and_the_time_since_the_start(tmp_path):
    args = argparse.Namespace(argv=["--seed", "1"], seed=1, out=tmp_path)
    start = results.Start(cpu=machine.cpu_info(), load=(1.0, 1.0, 1.0), time=time.perf_counter() - 2.0)
    header = results.record_header("benchmarks.x.y", args, start, dtype="float32")
    assert header["settings"] == {"seed": 1, "out": str(tmp_path), "dtype": "float32"}
    assert header["command"] == "python -m benchmarks.x.y --seed 1"
    assert header["cpu"] == machine.cpu_info() and header["load_average"]["start"] == [1.0, 1.0, 1.0]
    assert len(header["load_average"]["end"]) == 3 and 2.0 <= header["wall_seconds"] < 60
    assert json.loads(json.dumps(header)) == header


def test_start_reads_the_cpu_then_the_load_then_the_clock():
    before = time.perf_counter()
    start = results.start()
    assert before <= start.time <= time.perf_counter() and 0 <= start.seconds() < 60
    assert start.cpu == machine.cpu_info() and len(start.load) == 3
    assert results.load_average(start)["start"] == list(start.load) and len(results.load_average(start)["end"]) == 3
    with pytest.raises(AttributeError):
        start.time = 0.0  # frozen: the start is read once


def test_study_parser_runs_as_python_dash_m_described_by_the_docstrings_first_paragraph():
    parser = flags.study_parser("benchmarks.speed.decode")
    assert parser.prog == "python -m benchmarks.speed.decode"
    assert parser.description == importlib.import_module("benchmarks.speed.decode").__doc__.split("\n\n")[0]
    assert parser.formatter_class is flags.DefaultsHelpFormatter
    parser = flags.study_parser("benchmarks.x.y", "The study,\nin two lines.\n\nMore.", epilog="After the flags.")
    assert (parser.description, parser.epilog) == ("The study,\nin two lines.", "After the flags.")
    assert parser.format_help().startswith("usage: python -m benchmarks.x.y [-h]")


def test_parse_keeps_the_flags_given_as_argv_and_checks_the_name(capsys, monkeypatch):
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1)
    flags.add_output_flags(parser, "benchmarks.speed.decode", "decode")
    args = flags.parse(parser, ("--name", "run_2"))
    assert (args.argv, args.name) == (["--name", "run_2"], "run_2")
    monkeypatch.setattr(sys, "argv", ["python -m benchmarks.speed.decode", "--steps", "3"])
    args = flags.parse(parser)
    assert (args.argv, args.steps) == (["--steps", "3"], 3)
    with pytest.raises(SystemExit):
        flags.parse(parser, ["--name", "../elsewhere"])
    assert "--name must be letters, digits, _ and -. Received: '../elsewhere'" in capsys.readouterr().err
    nameless = argparse.ArgumentParser()
    nameless.add_argument("--steps", type=int, default=1)
    assert vars(flags.parse(nameless, [])) == {"steps": 1, "argv": []}


def test_check_at_least_and_check_tensorflow_name_the_flag(capsys, monkeypatch):
    parser = argparse.ArgumentParser()
    flags.check_at_least(parser, argparse.Namespace(steps=1, hint_weight=0.0), ("steps", "hint_weight"), 0)
    for value in (-1.0, math.nan):
        with pytest.raises(SystemExit):
            flags.check_at_least(parser, argparse.Namespace(hint_weight=value), ("hint_weight",), 0)
        assert f"--hint-weight must be >= 0. Received: {value}" in capsys.readouterr().err
    import keras

    monkeypatch.setattr(keras.backend, "backend", lambda: "tensorflow")
    flags.check_tensorflow(parser)
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    with pytest.raises(SystemExit):
        flags.check_tensorflow(parser)
    assert "needs Keras on TensorFlow (KERAS_BACKEND=tensorflow). Received: jax" in capsys.readouterr().err


def test_boolean_reads_the_config_flags_spellings():
    assert [flags.boolean(text) for text in ("true", "False", "yes", "no", "1", "0")] == [True, False] * 3
    with pytest.raises(argparse.ArgumentTypeError, match="expected true or false, got 'maybe'"):
        flags.boolean("maybe")


def test_run_orders_rotate_the_models_by_one_place_from_seed_to_seed():
    assert timing.run_orders(["a", "b"], [7, 8, 9]) == [(7, "a"), (7, "b"), (8, "b"), (8, "a"), (9, "a"), (9, "b")]
    assert timing.run_orders(["a"], [0, 1]) == [(0, "a"), (1, "a")]


def test_step_timer_and_round_clock_time_every_step_of_a_fit():
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    timer, clock = timing.StepTimer(), fit_timing.RoundClock()
    x, y = np.ones((8, 3), "float32"), np.zeros((8, 1), "float32")
    model.fit(x, y, batch_size=2, epochs=1, callbacks=[timer, clock], verbose=0)
    assert len(timer.milliseconds) == 4 and all(ms > 0 for ms in timer.milliseconds)
    assert clock.ended - clock.started >= sum(timer.milliseconds[1:]) / 1000
    assert clock.cpu_ended >= clock.cpu_started


def test_the_cluttered_task_has_validation_canvases_only_where_the_curve_asks(capsys):
    parser = argparse.ArgumentParser()
    cluttered.add_task_flags(parser, size=16, clutter=0, object_scale="0.4,0.6", train_size=4, test_size=2)
    vision_training.add_curve_flag(parser)
    args = parser.parse_args(["--validation-size", "3"])
    cluttered.check_task_flags(parser, args)
    assert list(cluttered.generate_task(args)) == ["train", "test"]  # --curve-every 0: no curve, no validation
    assert "generated 6 canvases in " in capsys.readouterr().out
    data = cluttered.generate_task(parser.parse_args(["--validation-size", "3", "--curve-every", "2"]))
    assert {split: len(glyphs.labels) for split, glyphs in data.items()} == {"train": 4, "validation": 3, "test": 2}
    assert "generated 9 canvases in " in capsys.readouterr().out
    turned = cluttered.generate_task(parser.parse_args(["--max-rotation", "90"]))["train"]
    assert np.abs(data["train"].angles).max() <= np.radians(30) < np.abs(turned.angles).max() <= np.radians(90)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cluttered.check_task_flags(parser, parser.parse_args(["--curve-every", "-1"]))
    assert "--curve-every must be >= 0. Received: -1" in capsys.readouterr().err
