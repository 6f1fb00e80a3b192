"""`train --task lm|mlm`: language models trained, resumed, evaluated and exported by the run job.

One tiny causal LM run from the command line is shared by the tests (`lm_run`); the masked LM
trains once, on text files. The export of the causal LM is reloaded in a process that imports
only TensorFlow and tensorflow-text, and served by `keras-transformer generate`.
"""

import contextlib
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf
from conftest import once_per_session, serving_op_lists, session_temp_folder

from keras_transformer import runs
from keras_transformer.cli import main
from keras_transformer.config import TrainConfig
from keras_transformer.data import dates
from keras_transformer.data.special_tokens import MASK_ID, PAD_ID, RESERVED_TOKENS, START_ID
from keras_transformer.data.vocabulary import write_vocabulary
from keras_transformer.decoding.generation import generate
from keras_transformer.export import GENERATE_IDS_SIGNATURE_KEY, SIGNATURE_KEY, WARMUP_FILE, saved_model_op_types
from keras_transformer.runs.language import VOCAB_FILE, LanguageModelTask

pytestmark = pytest.mark.slow

MAX_LENGTH = 16
# The shared causal LM run: the tiny preset (with dropout, so that resume restores its seed generators).
LM_SETTINGS = dict(
    task="lm",
    preset="tiny",
    train_size=200,
    validation_size=16,
    test_size=16,
    vocab_size=150,
    epochs=2,
    steps_per_epoch=3,
    batch_size=8,
    warmup_steps=10,
    precision="float32",
    model_name="lm",
    checkpoint_every_seconds=0.0,
)
LM_MODEL = {"max_length": MAX_LENGTH, "dropout_rate": 0.1}


def _flags(settings, model, root):
    values = {**settings, **model, "run_dir": str(root / "run"), "export_dir": str(root / "export")}
    flags = []
    for name, value in values.items():
        flags += [
            "--" + name.replace("_", "-"),
            *(map(str, value) if isinstance(value, (list, tuple)) else [str(value)]),
        ]
    return flags


def _quiet(argv):
    """`main(argv)` with its standard output captured: `(status, output)`."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(argv)
    return status, out.getvalue()


def _train_lm_run(root):
    status, output = _quiet(["train", *_flags(LM_SETTINGS, LM_MODEL, root), "--checkpoint-every-steps", "2"])
    assert status == 0, output
    (root / "output.txt").write_text(output)


@pytest.fixture(scope="session")
def lm_run(tmp_path_factory, worker_id):
    """`(root, summary, output)` of the tiny causal LM trained by `train --task lm` on the built-in corpus.

    Trained once per test session (`once_per_session`) and read-only.
    """
    root = once_per_session(session_temp_folder(tmp_path_factory, worker_id), "lm_run", _train_lm_run)
    summary = json.loads((root / "run" / "summary.json").read_text())
    return root, summary, (root / "output.txt").read_text()


def test_lm_trains_evaluates_and_exports_from_the_command_line(lm_run):
    root, summary, output = lm_run
    test = summary["test"]
    assert output.splitlines()[-1] == (
        f"Done in {summary['total_seconds']:.0f} s: test perplexity {test['perplexity']:.2f}, token accuracy "
        f"{test['accuracy']:.2%}; exported to {summary['export_path']}"
    )
    assert summary["model_config"]["kind"] == "decoder" and summary["model_config"]["max_length"] == MAX_LENGTH
    assert summary["train_config"]["task"] == "lm" and summary["train_texts"] == 200
    assert summary["target_tokens_per_second"] > 0 and "val_loss" in summary["final_metrics"]
    assert test["texts"] == 16 and test["tokens"] > 16 and np.isclose(test["perplexity"], np.exp(test["loss"]), 1e-3)
    # A few greedy continuations of test texts' first halves, logged and summarized.
    assert len(test["examples"]) == 3
    for example in test["examples"]:
        assert example["text"].startswith(example["prompt"])
        assert f"  {example['prompt']!r} -> {example['continuation']!r} (text {example['text']!r})" in output
    # One vocabulary, no <mask>: a causal LM's.
    vocabulary = (root / "run" / VOCAB_FILE).read_text().splitlines()
    assert tuple(vocabulary[:5]) == (*RESERVED_TOKENS, vocabulary[4]) and "<mask>" not in vocabulary
    # The translation export's layout: versions, assets, warm-up requests of both signatures, models.config.
    export_path = Path(summary["export_path"])
    assert export_path == root / "export" / "lm" / "1"
    assert {"vocab.txt", "model_config.json"} <= {path.name for path in (export_path / "assets").iterdir()}
    assert '"lm"' in (root / "export" / "models.config").read_text()
    from tensorflow_serving.apis import prediction_log_pb2

    requests = [
        prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        for record in tf.data.TFRecordDataset(str(export_path / WARMUP_FILE))
    ]
    assert sorted(request.model_spec.signature_name for request in requests) == [
        GENERATE_IDS_SIGNATURE_KEY,
        SIGNATURE_KEY,
    ]


def test_lm_export_runs_in_a_process_without_the_project_as_in_process(lm_run):
    root, summary, _ = lm_run
    # The evaluation's continuations came from the in-process generator that was then exported.
    examples = summary["test"]["examples"]
    prompts = [example["prompt"] for example in examples] + [""]
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import json, sys
                import tensorflow as tf
                import tensorflow_text
                loaded = tf.saved_model.load({summary["export_path"]!r})
                out = loaded.signatures["serving_default"](prompt=tf.constant({prompts!r}))
                ids = loaded.signatures["generate_ids"](prompt_ids=tf.constant([[2, 7, 8, 0]], tf.int32))
                assert not any(name.startswith("keras_transformer") for name in sys.modules), "project imported"
                print(json.dumps({{
                    "continuation": [text.decode() for text in out["continuation"].numpy()],
                    "output_ids": out["output_ids"].numpy().tolist(),
                    "truncated": out["truncated"].numpy().tolist(),
                    "ids": ids["output_ids"].numpy().tolist(),
                }}))
                """
            ),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served["continuation"][:-1] == [example["continuation"] for example in examples]
    assert served["truncated"] == [False] * 4
    output_ids = np.array(served["output_ids"])
    assert output_ids.shape == (4, MAX_LENGTH) and (output_ids[:, 0] == START_ID).all()
    assert served["ids"][0][:3] == [2, 7, 8] and len(served["ids"][0]) == MAX_LENGTH

    # Core TensorFlow and tensorflow-text ops only: what TF Serving 2.12+ runs.
    core, text_ops = serving_op_lists()
    used = saved_model_op_types(summary["export_path"])
    assert "WordpieceTokenizeWithOffsets" in used and "ArgMax" in used  # tokenizer and greedy choice in the graph
    assert used - core - text_ops == set()


def test_generate_command_continues_input_lines_and_reports_bad_ones(lm_run, tmp_path, capsys):
    root, summary, _ = lm_run
    examples = summary["test"]["examples"]
    # Bad lines (not UTF-8, too long for the model) are reported by number; every line is continued.
    prompts = b"".join(example["prompt"].encode() + b"\n" for example in examples)
    (tmp_path / "prompts.txt").write_bytes(prompts + b"\xff\xfe 1987\n" + b"word " * 40 + b"\n")
    assert main(["generate", "--model", str(root / "export" / "lm"), "--input", str(tmp_path / "prompts.txt")]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 5 and lines[:3] == [example["continuation"] for example in examples]
    assert captured.err.splitlines() == [
        "warning: line 4: not valid UTF-8; bad bytes read as U+FFFD",
        "warning: line 5: longer than the model reads (max_length - 2 pieces, 65536 bytes); only its beginning "
        "was continued",
    ]
    assert main(["generate", "--model", str(tmp_path / "missing"), "hello"]) == 2
    assert capsys.readouterr().err == f"error: No SavedModel at {tmp_path / 'missing'}\n"
    assert main(["generate", "--model", str(root / "export" / "lm"), "--input", "x.txt", "hello"]) == 2
    assert capsys.readouterr().err == "error: give the prompts as arguments or with --input, not both\n"


def test_evaluate_and_export_a_finished_lm_run_with_another_sampler(lm_run, tmp_path, capsys):
    root, summary, _ = lm_run
    run = ["--run-dir", str(root / "run")]
    assert main(["evaluate", *run]) == 0
    test = summary["test"]
    assert (
        f"Test: loss {test['loss']:.4f}, perplexity {test['perplexity']:.2f}, token accuracy {test['accuracy']:.2%} "
        f"over {test['tokens']} next tokens of 16 texts"
    ) in capsys.readouterr().out

    sampler = ["--sampler", "top_k", "--top-k", "5", "--temperature", "0.7", "--sampler-seed", "3"]
    assert main(["export", *run, "--export-dir", str(tmp_path), "--ids-only", *sampler]) == 0
    export_path = tmp_path / "lm_ids" / "1"
    assert capsys.readouterr().out == f"Exported to {export_path}\n"
    core, _ = serving_op_lists()
    used = saved_model_op_types(export_path)
    assert used - core == set() and "TopKV2" in used  # core ops only, and the top-k sampler in the graph
    assert (export_path / "assets" / VOCAB_FILE).is_file() and '"lm_ids"' in (tmp_path / "models.config").read_text()
    # The sampler's seed state is part of the export: every freshly loaded copy samples alike.
    prompt_ids = tf.constant([[START_ID, 7, 8, 0], [START_ID, 0, 0, 0]], tf.int32)
    samples = [
        tf.saved_model.load(str(export_path)).signatures[SIGNATURE_KEY](prompt_ids=prompt_ids)["output_ids"].numpy()
        for _ in range(2)
    ]
    np.testing.assert_array_equal(samples[0], samples[1])
    assert samples[0].shape == (2, MAX_LENGTH) and samples[0][0, :3].tolist() == [START_ID, 7, 8]
    # A translation flag on a language-model run is one error line.
    assert main(["export", *run, "--beam-size", "2"]) == 2
    assert capsys.readouterr().err == "error: --beam-size is a setting of --task translate, not of --task lm\n"


def test_export_with_beam_search_continues_as_generate_does(lm_run, tmp_path, capsys):
    root, _, _ = lm_run
    run = ["--run-dir", str(root / "run"), "--export-dir", str(tmp_path), "--ids-only"]
    assert main(["export", *run, "--sampler", "beam", "--num-beams", "3"]) == 0
    export_path = tmp_path / "lm_ids" / "1"
    assert capsys.readouterr().out == f"Exported to {export_path}\n"
    core, _ = serving_op_lists()
    assert saved_model_op_types(export_path) - core == set()  # core ops only
    prompt_ids = tf.constant([[START_ID, 7, 8, 0], [START_ID, 0, 0, 0]], tf.int32)
    served = tf.saved_model.load(str(export_path)).signatures[SIGNATURE_KEY](prompt_ids=prompt_ids)["output_ids"]
    model = keras.models.load_model(root / "run" / "model.keras")
    expected = generate(model, prompt_ids, MAX_LENGTH, keras_hub.samplers.BeamSampler(num_beams=3))
    np.testing.assert_array_equal(served.numpy(), keras.ops.convert_to_numpy(expected))
    assert main(["export", *run, "--sampler", "beam", "--num-beams", "0"]) == 2
    assert "num_beams" in capsys.readouterr().err


class _Preempted(Exception):
    pass


class _StopAtStep(keras.callbacks.Callback):
    """Raises `_Preempted` as step `step` (counted from 1 over the whole `fit`) begins."""

    def __init__(self, step):
        super().__init__()
        self.step, self.seen = step, 0

    def on_train_batch_begin(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.step:
            raise _Preempted


def test_a_resumed_lm_run_ends_with_the_weights_of_the_uninterrupted_one(lm_run, tmp_path, monkeypatch):
    root, _, _ = lm_run
    # Evaluation and export are tested above: here only the weights count (and nothing is exported).
    monkeypatch.setattr(LanguageModelTask, "evaluate", lambda *args: {})
    settings = TrainConfig(
        **LM_SETTINGS, checkpoint_every_steps=2, run_dir=str(tmp_path / "run"), export_dir=str(tmp_path / "export")
    ).validate()
    # Stopped as step 6 begins: checkpoints at steps 2, 3 (the first epoch's end) and 4; resumed mid-epoch from 4.
    with pytest.raises(_Preempted):
        runs.train(
            settings, dict(LM_MODEL), log=lambda line: None, extra_callbacks=[_StopAtStep(6)], verbose=0, export=False
        )
    lines = []
    resumed = runs.train(settings, dict(LM_MODEL), resume=True, log=lines.append, verbose=0, export=False)
    assert resumed["export_path"] is None and not (tmp_path / "export").exists()
    assert (
        f"Restored the training state after 4 steps from {tmp_path / 'run' / 'checkpoints' / 'step-00000004'}" in lines
    )
    assert resumed["checkpoints"]["resumed_from_step"] == 4
    expected = keras.models.load_model(root / "run" / "model.keras").get_weights()
    actual = keras.models.load_model(tmp_path / "run" / "model.keras").get_weights()
    for got, wanted in zip(actual, expected, strict=True):
        np.testing.assert_allclose(got, wanted, rtol=1e-5, atol=1e-6)


def _write_text_files(root):
    """Two training files, a validation and a test file of typed dates: `{split: [paths]}`."""
    paths = {}
    for split, size in (("train", 120), ("validation", 12), ("test", 12)):
        sources, _ = dates.builtin_corpus(split, size=size)
        halves = [sources] if split != "train" else [sources[: size // 2], sources[size // 2 :]]
        paths[split] = []
        for index, lines in enumerate(halves):
            path = root / f"{split}{index}.txt"
            path.write_text("\n".join(lines) + "\n\n", encoding="utf-8")  # a blank line, skipped and counted
            paths[split].append(path)
    return paths


def test_mlm_trains_on_text_files_and_exports_a_mask_filler(tmp_path):
    files = _write_text_files(tmp_path)
    settings = {**LM_SETTINGS, "task": "mlm", "train_size": 0, "validation_size": 0, "test_size": 0}
    settings.update(
        {f"{split}_files": paths for split, paths in files.items()}, model_name="mlm", epochs=1, steps_per_epoch=2
    )
    status, output = _quiet(["train", *_flags(settings, {"max_length": MAX_LENGTH}, tmp_path)])
    assert status == 0, output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["model_config"]["kind"] == "encoder"
    assert summary["train_texts"] == 120 and summary["skipped_while_reading"] == {"empty": 2}
    assert summary["test"]["texts"] == 12 and 0 < summary["test"]["tokens"] < summary["train_pieces"]
    assert "masked tokens of 12 texts" in output and "exported to" in output.splitlines()[-1]
    assert (tmp_path / "run" / VOCAB_FILE).read_text().splitlines()[MASK_ID] == "<mask>"

    # Token ids in, filled ids and logits out, in core ops only.
    export_path = summary["export_path"]
    core, _ = serving_op_lists()
    assert saved_model_op_types(export_path) - core == set()
    fill = tf.saved_model.load(export_path).signatures[SIGNATURE_KEY]
    token_ids = np.array([[START_ID, MASK_ID, 9, MASK_ID, 3] + [PAD_ID] * MAX_LENGTH], "int32")
    out = fill(token_ids=tf.constant(token_ids))
    filled = out["filled_ids"].numpy()
    assert filled.shape == (1, MAX_LENGTH) and out["logits"].shape == (
        1,
        MAX_LENGTH,
        summary["model_config"]["vocab_size"],
    )
    assert out["truncated"].numpy().tolist() == [False]
    masked = token_ids[0, :MAX_LENGTH] == MASK_ID
    assert (filled[0, ~masked] == token_ids[0, :MAX_LENGTH][~masked]).all()
    assert (filled[0, masked] >= len(RESERVED_TOKENS) + 1).all()  # a text piece, never a reserved id


@pytest.mark.parametrize("task, corpus", [("lm", "files"), ("mlm", "builtin")])
def test_both_tasks_read_both_corpora(task, corpus, tmp_path):
    """The data each task trains on, from either corpus (the other two pairs train end to end above)."""
    files = _write_text_files(tmp_path) if corpus == "files" else {}
    values = {**LM_SETTINGS, "task": task, "corpus": corpus, "run_dir": str(tmp_path / "run")}
    values.update({f"{split}_files": [str(path) for path in paths] for split, paths in files.items()})
    config = TrainConfig(**values).validate()
    train_config, model_config = runs.prepare_run(config, {"max_length": MAX_LENGTH}, log=lambda line: None)
    task_object = LanguageModelTask(task)
    data = task_object.read_and_encode(train_config, model_config, log=lambda line: None)
    inputs, labels = next(iter(task_object.train_dataset(data, train_config)))
    assert inputs.shape == labels.shape == (8, MAX_LENGTH)
    if task == "lm":  # packed windows: the labels are the inputs shifted by one
        np.testing.assert_array_equal(inputs.numpy()[:, 1:], labels.numpy()[:, :-1])
    else:  # masked: labels only where a piece was selected, <mask> among the inputs
        assert (labels.numpy() != PAD_ID).any() and (inputs.numpy() == MASK_ID).any()


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--task", "lm", "--target-vocab-size", "50"],
            "--target-vocab-size is a setting of --task translate, not of --task lm",
        ),
        (["--task", "mlm", "--beam-size", "2"], "--beam-size is a setting of --task translate, not of --task mlm"),
        (["--task", "mlm", "--sampler", "top_k"], "--sampler is a setting of --task lm, not of --task mlm"),
        (["--vocab-size", "300"], "--vocab-size is a setting of --task lm/mlm, not of --task translate"),
        (["--task", "lm", "--max-source-len", "30"], "--max-source-len is a translation-model setting"),
        (["--max-length", "30"], "--max-length is a language-model setting (--task lm/mlm)"),
        (["--task", "lm", "--max-length", "1"], "--task lm needs --max-length >= 2. Received: 1"),
        (["--task", "lm", "--top-p", "1.5"], "`top_p` must be a number in (0, 1]. Received: top_p=1.5"),
    ],
)
def test_settings_of_another_task_are_one_error_line_before_anything_is_written(argv, message, tmp_path, capsys):
    assert main(["train", "--run-dir", str(tmp_path / "run"), *argv]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {message}") and error.count("\n") == 1, error
    assert not (tmp_path / "run").exists()


def test_mlm_refuses_a_vocabulary_without_mask_in_one_line(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    write_vocabulary([*RESERVED_TOKENS, "a", "b", "##a", "##b"], tmp_path / "run" / VOCAB_FILE)
    assert main(["train", "--task", "mlm", "--run-dir", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'run' / VOCAB_FILE} has no <mask>: --task mlm needs a vocabulary with it; remove the "
        "file to learn one from the training text, or choose another --run-dir\n"
    )
    assert not (tmp_path / "run" / "train_config.json").exists()


def test_a_resumed_run_keeps_its_task(lm_run, capsys):
    root, _, _ = lm_run
    assert main(["train", "--resume", "--run-dir", str(root / "run"), "--task", "mlm"]) == 2
    assert "Cannot change task when resuming" in capsys.readouterr().err
