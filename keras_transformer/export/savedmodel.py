"""SavedModel exports in TF Serving's layout: the weights every export carries, versions, warm-up, models.config.

    EXPORT_DIR/models.config                          model server config listing every model here
    EXPORT_DIR/MODEL_NAME/1/saved_model.pb
                           /variables/...
                           /assets/source_vocab.txt, target_vocab.txt, model_config.json
                           /assets.extra/tf_serving_warmup_requests
                           /checksums.sha256   every other file's SHA-256 (`integrity.py`)
    EXPORT_DIR/MODEL_NAME/2/...   (the highest integer version is served)

What is exported: a translation model (`translation.py`: `Translator`, `IdsTranslator`), a causal
language model and a masked one (`language.py`: `TextGenerator`, `IdsGenerator`, `MaskFiller`);
the signatures' names are defined here. Decoding (a translation's beam size, length penalty and
output length; a language model's sampler) is fixed at export time. A new version is written to a
staging folder beside the versions and renamed into place, so a model server never sees half a
model; a version damaged later on disk is found by its checksums and passed over
(`latest_version_dir`).
"""

import os
import re
import warnings
from pathlib import Path

import tensorflow as tf

from keras_transformer.export.integrity import (
    CHECKSUMS_FILE,
    EXPORT_FORMATS,
    DamagedExportError,
    version_problems,
    write_checksums,
)
from keras_transformer.files import staging_folder

SIGNATURE_KEY = "serving_default"
IDS_SIGNATURE_KEY = "translate_ids"
GENERATE_IDS_SIGNATURE_KEY = "generate_ids"
WARMUP_FILE = Path("assets.extra") / "tf_serving_warmup_requests"
MODELS_CONFIG_FILE = "models.config"
# The text signature reads at most this many bytes of each text; the rest is ignored and the
# text flagged `truncated`. Without it the time and memory of one text grow with its length
# (tokenization runs over the whole text before the cut to `max_source_len` tokens), and Unicode
# normalization can make a text of short characters 11 times longer (U+FDFA is 18 characters).
# A sentence of any `max_source_len` in use is far shorter.
MAX_TEXT_BYTES = 1 << 16


class ExportModule(tf.Module):
    """The weights and assets every export carries.

    Only the weights are saved, as a list of `tf.Variable`s, the way `keras.export.ExportArchive`
    does it: a Keras 3 model attached as a tracked attribute loads in TF2 but not in TF Serving's
    C++ loader (its variables are never restored: "Could not find variable ..."), and would carry
    the optimizer's state into the export.

    Args:
        model: the trained Keras model.
        model_config: its config (`ModelConfig` or `LanguageModelConfig`).
        config_path: the `model_config.json` to ship as an asset.
        vocab_paths: vocabulary files to ship as assets (an ids-only export's, for the client).
        name: the module's name.
    """

    def __init__(self, model, model_config, config_path, vocab_paths=(), name=None):
        super().__init__(name=name)
        object.__setattr__(self, "model", model)  # untracked
        self.model_weights = [weight.value for weight in model.weights]
        self.model_config = model_config
        self.model_config_file = tf.saved_model.Asset(str(config_path))
        self._config_path = str(config_path)
        self.vocab_files = [tf.saved_model.Asset(str(path)) for path in vocab_paths]


def checked_ids(ids, vocab_size, name):
    """`ids` once checked to be `0 <= id < vocab_size`.

    The checks run before anything reads the ids: otherwise an embedding's gather may run first
    and fail with its own, less helpful, message.
    """
    checks = [
        tf.debugging.assert_non_negative(ids, message=f"{name} must be >= 0 (0 is padding)"),
        tf.debugging.assert_less(ids, vocab_size, message=f"{name} must be < the vocabulary size {vocab_size}"),
    ]
    with tf.control_dependencies(checks):
        return tf.identity(ids)


def next_version(model_dir):
    """1 + the highest integer version folder in `model_dir` (1 when there is none)."""
    return max(_versions(model_dir), default=0) + 1


def _versions(model_dir):
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        return []
    return [int(p.name) for p in model_dir.iterdir() if p.is_dir() and re.fullmatch(r"\d+", p.name)]


def export_module(module, export_dir, model_name, warmup_inputs=None):
    """Save `module` as the next version of `export_dir/model_name`, atomically.

    Then rewrite `export_dir/models.config`.

    Args:
        module: a `Translator`, `IdsTranslator`, `TextGenerator`, `IdsGenerator` or `MaskFiller`:
            a `tf.Module` whose `signatures()` gives the signatures to save.
        export_dir: export root.
        model_name: folder and served name of the model.
        warmup_inputs: optional `{signature name: {input name: array}}`, or a list of such
            `{input name: array}` per signature; each becomes a warm-up request in
            `assets.extra/tf_serving_warmup_requests`, which TF Serving replays before it serves
            the version (so the first user does not wait for graph set-up).

    Returns:
        `Path` of the new version folder.
    """
    model_dir = Path(export_dir) / model_name
    with staging_folder(model_dir) as staging:
        tf.saved_model.save(module, str(staging), signatures=module.signatures())
        if warmup_inputs:
            write_warmup_requests(staging / WARMUP_FILE, model_name, warmup_inputs)
        version_dir = publish_version(staging, model_dir)
    write_models_config(export_dir)
    return version_dir


def publish_version(staging, model_dir):
    """Write the checksums of a complete staging folder, then rename it into `model_dir` as its next version.

    Args:
        staging: a folder from `files.staging_folder(model_dir)` holding every file of the version.
        model_dir: the model's folder of integer versions.

    Returns:
        `Path` of the new version folder.
    """
    write_checksums(staging)  # last: it covers every file of the version
    while True:
        version_dir = Path(model_dir) / str(next_version(model_dir))
        try:
            os.rename(staging, version_dir)  # atomic; fails if another writer took the number
            return version_dir
        except OSError:
            if not version_dir.exists():
                raise


def export_translator(translator, export_dir, model_name, warmup_inputs=None):
    """`export_module` of a `Translator` or an `IdsTranslator` (the name the translation export always had)."""
    return export_module(translator, export_dir, model_name, warmup_inputs)


def write_warmup_requests(path, model_name, warmup_inputs):
    """Write `PredictionLog` warm-up records (TF Serving's format) for each signature's inputs (`export_module`)."""
    from tensorflow_serving.apis import prediction_log_pb2

    from keras_transformer.export.clients import predict_request

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for signature_name, requests in warmup_inputs.items():
            for inputs in [requests] if isinstance(requests, dict) else requests:
                request = predict_request(model_name, inputs, signature_name=signature_name)
                log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
                writer.write(log.SerializeToString())


def write_models_config(export_dir, serving_root="/models"):
    """Write `export_dir/models.config`, the model server's `--model_config_file`.

    It lists every model folder under `export_dir` that holds SavedModel versions, at
    `serving_root/<name>` (where the Docker command in docs/serving.md mounts `export_dir`). Replaced atomically.

    Args:
        export_dir: export root, one folder per model.
        serving_root: where the model server sees `export_dir`.

    Returns:
        `Path` of the file.
    """
    export_dir = Path(export_dir)
    # Only folders of SavedModel versions: another format's (a CTranslate2 export) is not TF Serving's.
    names = sorted(
        p.name
        for p in export_dir.iterdir()
        if p.is_dir() and any((p / str(version) / "saved_model.pb").is_file() for version in _versions(p))
    )
    entries = "".join(
        f'  config {{\n    name: "{name}"\n    base_path: "{serving_root}/{name}"\n'
        f'    model_platform: "tensorflow"\n  }}\n'
        for name in names
    )
    path = export_dir / MODELS_CONFIG_FILE
    staging = path.with_name(f".{MODELS_CONFIG_FILE}.tmp")
    staging.write_text(f"model_config_list {{\n{entries}}}\n")
    os.replace(staging, path)
    return path


def latest_version_dir(path, on_skip=None, export_format="savedmodel"):
    """The export version to read at `path`: `path` itself if it is a version, else its newest intact version.

    A version is intact when every file its `checksums.sha256` names has its bytes
    (`integrity.version_problems`); damaged versions are passed over for the next newest.

    Args:
        path: a version folder (holding `saved_model.pb` or `checksums.sha256`) or a model folder
            of integer version folders.
        on_skip: called as `on_skip(version_dir, problems)` for each damaged version passed over
            (default: a `UserWarning`).
        export_format: a key of `integrity.EXPORT_FORMATS`: `"savedmodel"`, or `"ctranslate2"`
            (versions hold `model.bin` instead of `saved_model.pb`).

    Returns:
        `Path` of the version folder.

    Raises:
        FileNotFoundError: no model of the format at `path`.
        DamagedExportError: `path` is a damaged version, or every version of `path` is damaged.
    """
    model_file, kind = EXPORT_FORMATS[export_format]
    path = Path(path)
    if (path / model_file).is_file() or (path / CHECKSUMS_FILE).is_file():
        problems = version_problems(path, export_format)
        if problems:
            raise DamagedExportError(f"{path} is damaged: {'; '.join(problems)}")
        return path
    if not path.is_dir():
        raise FileNotFoundError(f"No {kind} at {path}")
    versions = sorted(_versions(path), reverse=True)
    if not versions:
        raise FileNotFoundError(f"No {kind} at {path}: no {model_file} and no integer version folders")
    on_skip = on_skip or _warn_skipped
    damaged = []
    for version in versions:
        problems = version_problems(path / str(version), export_format)
        if not problems:
            for version_dir, its_problems in damaged:
                on_skip(version_dir, its_problems)
            return path / str(version)
        damaged.append((path / str(version), problems))
    listed = "; ".join(f"version {version_dir.name}: {', '.join(problems)}" for version_dir, problems in damaged)
    raise DamagedExportError(f"No intact version in {path}: {listed}")


def _warn_skipped(version_dir, problems):
    warnings.warn(f"skipped damaged version {version_dir}: {'; '.join(problems)}", stacklevel=3)


def saved_model_op_types(export_dir) -> set[str]:
    """All op types a SavedModel's graphs use (to compare with a model server's op list).

    Collects `node.op` over each meta graph's `graph_def.node` and over the nodes of every
    function in `graph_def.library`, minus the names of those library functions themselves
    (calls to them show up as ops named after the function).

    Args:
        export_dir: directory holding `saved_model.pb`.

    Returns:
        The set of op type names.

    Raises:
        FileNotFoundError: `export_dir` holds no `saved_model.pb`.
    """
    from tensorflow.core.protobuf import saved_model_pb2

    pb_path = Path(os.fspath(export_dir)) / "saved_model.pb"
    if not pb_path.is_file():
        raise FileNotFoundError(2, f"no saved_model.pb in {export_dir}", str(pb_path))
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString(pb_path.read_bytes())
    op_types: set[str] = set()
    for meta_graph in saved_model.meta_graphs:
        graph_def = meta_graph.graph_def
        function_names = {f.signature.name for f in graph_def.library.function}
        graph_ops = {node.op for node in graph_def.node}
        for function in graph_def.library.function:
            graph_ops.update(node.op for node in function.node_def)
        op_types |= graph_ops - function_names
    return op_types
