"""`xla_decoding`: translations decoded as one XLA computation, in process and in the export.

The same translations as the default decoding (the tiny run's smallest greedy margin between the
two likeliest tokens is about 4e-3; XLA's scores differ from TensorFlow's by about 4e-6), the
awkward inputs' defined results kept, and an export a model server can warm up and serve.
"""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import serving_op_lists
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import prediction_log_pb2

from keras_transformer.cli import main
from keras_transformer.data import dates
from keras_transformer.export import WARMUP_FILE, saved_model_op_types
from keras_transformer.runs.translation import make_translator

pytestmark = pytest.mark.slow

# Dates of several forms and lengths, then an empty text, spaces only, more words than the model
# reads (cut and flagged truncated) and bytes that are not UTF-8.
TEXTS = dates.builtin_corpus("test", size=40, seed=5)[0] + ["", "   ", "x " * 40, "\xff\xfe bad"]


def _translators(loaded_run, beam_size):
    """`(default, xla)` translators of the shared tiny run, decoding with `beam_size`."""
    train_config, model_config, model, translator = loaded_run
    tokenizers = (translator.source_tokenizer, translator.target_tokenizer)
    return tuple(
        make_translator(
            model,
            model_config,
            *tokenizers,
            train_config.run_dir,
            dataclasses.replace(train_config, xla_decoding=xla),
            beam_size=beam_size,
        )  # fmt: skip
        for xla in (False, True)
    )


@pytest.mark.parametrize("beam_size", [1, 4])
def test_xla_decoding_translates_as_the_default_decoding(loaded_run, beam_size):
    default, xla = _translators(loaded_run, beam_size)
    assert xla.jit_compile and not default.jit_compile
    expected, got = (translator.translate(tf.constant(TEXTS)) for translator in (default, xla))
    assert list(got["translation"].numpy()) == list(expected["translation"].numpy())
    np.testing.assert_array_equal(got["truncated"].numpy(), expected["truncated"].numpy())
    assert got["truncated"].numpy()[-2] and not got["truncated"].numpy()[0]
    np.testing.assert_allclose(got["score"].numpy(), expected["score"].numpy(), atol=1e-4)
    assert got["translation"].numpy()[-4] == b"" and got["score"].numpy()[-4] == 0  # nothing to translate
    empty = xla.translate_ids(tf.zeros((0, 5), tf.int32))  # an empty batch: empty outputs
    assert empty["output_ids"].shape == (0, loaded_run[1].max_target_len) and empty["score"].shape == (0,)


def test_the_xla_export_is_marked_for_xla_keeps_tf_serving_ops_and_warms_up_single_sentences(
    trained_run, tmp_path, capsys
):
    train_config, _ = trained_run
    argv = ["export", "--run-dir", train_config.run_dir, "--export-dir", str(tmp_path), "--xla-decoding", "true"]
    assert main(argv) == 0
    version = tmp_path / train_config.model_name / "1"
    assert f"Exported to {version}" in capsys.readouterr().out

    saved_model = saved_model_pb2.SavedModel.FromString((version / "saved_model.pb").read_bytes())
    functions = saved_model.meta_graphs[0].graph_def.library.function
    compiled = [
        node for function in functions for node in function.node_def if node.attr["_XlaMustCompile"].b
    ]  # fmt: skip
    assert compiled, "no call in the graph asks for XLA"
    core, text_ops = serving_op_lists()
    assert saved_model_op_types(version) - core - text_ops == set()  # the same op set as the default export

    loaded = tf.saved_model.load(str(version))
    batches = {}
    for record in tf.data.TFRecordDataset(str(version / WARMUP_FILE)):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        inputs = {name: tf.constant(tf.make_ndarray(proto)) for name, proto in request.inputs.items()}
        outputs = loaded.signatures[request.model_spec.signature_name](**inputs)
        size = int(outputs["score"].shape[0])
        batches.setdefault(request.model_spec.signature_name, []).append(size)
    assert {name: sizes[-1] for name, sizes in batches.items()} == {"serving_default": 1, "translate_ids": 1}
    assert all(sizes[0] > 1 for sizes in batches.values())

    texts = tf.constant(TEXTS[:8])
    served = loaded.signatures["serving_default"](text=texts)["translation"].numpy()
    default = tf.saved_model.load(str(Path(trained_run[1]["export_path"]))).signatures["serving_default"]
    assert list(served) == list(default(text=texts)["translation"].numpy())
