"""SavedModel export in TF Serving's layout: raw text in, translation out, all in the graph.

    EXPORT_DIR/MODEL_NAME/1/saved_model.pb
                           /variables/...
                           /assets/source_vocab.txt, target_vocab.txt, model_config.json
    EXPORT_DIR/MODEL_NAME/2/...   (the highest integer version is served)

The `serving_default` signature takes `text: string[B]` and returns
`translation: string[B]`. Tokenization (tensorflow-text WordPiece), greedy decoding
(`tf.while_loop`) and detokenization all run inside the graph; vocabularies and the model
config travel as SavedModel assets. A new version is written to a temporary folder beside the
versions and renamed into place, so a model server never sees half a model.
"""

import os
import re
import shutil
import tempfile
from pathlib import Path

import tensorflow as tf

from keras_transformer.decoding import greedy_decode

SIGNATURE_KEY = "serving_default"


class Translator(tf.Module):
    """Text-to-text translation as a `tf.Module` with a `serving_default` signature.

    Args:
        model: a trained model from `build_transformer`.
        model_config: its `ModelConfig` (its `max_source_len` truncates inputs and its
            `max_target_len` bounds outputs).
        source_tokenizer, target_tokenizer: `SubwordTokenizer`s of the run.
        config_path: path of the `model_config.json` to ship as an asset.
    """

    def __init__(self, model, model_config, source_tokenizer, target_tokenizer, config_path):
        super().__init__(name="translator")
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.model_config_file = tf.saved_model.Asset(str(config_path))
        self._max_source_len = model_config.max_source_len
        self._max_target_len = model_config.max_target_len

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def translate(self, text):
        """`text: string[B]` -> `{"translation": string[B]}`. Inputs longer than
        `max_source_len` tokens are truncated to it; an empty batch gives an empty batch."""
        pieces = self.source_tokenizer.tokenize(text)[:, : self._max_source_len]  # (B, (S))
        # Padded to the longest input (at least one position, so an all-empty batch still has keys).
        width = tf.maximum(pieces.bounding_shape(axis=1), 1)
        source_ids = pieces.to_tensor(default_value=0, shape=tf.stack([pieces.nrows(), width]))  # (B, S)
        output_ids = greedy_decode(self.model, source_ids, self._max_target_len)  # (B, L)
        return {"translation": self.target_tokenizer.detokenize(output_ids)}


def next_version(model_dir):
    """1 + the highest integer version folder in `model_dir` (1 when there is none)."""
    model_dir = Path(model_dir)
    versions = (
        [int(p.name) for p in model_dir.iterdir() if p.is_dir() and re.fullmatch(r"\d+", p.name)]
        if model_dir.is_dir()
        else []
    )
    return max(versions, default=0) + 1


def export_translator(translator, export_dir, model_name):
    """Save `translator` as the next version of `export_dir/model_name`, atomically.

    Returns:
        `Path` of the new version folder.
    """
    model_dir = Path(export_dir) / model_name
    model_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=model_dir))
    try:
        tf.saved_model.save(translator, str(staging), signatures={SIGNATURE_KEY: translator.translate})
        while True:
            version_dir = model_dir / str(next_version(model_dir))
            try:
                os.rename(staging, version_dir)  # atomic; fails if another writer took the number
                return version_dir
            except OSError:
                if not version_dir.exists():
                    raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def latest_version_dir(path):
    """`path` itself if it holds a `saved_model.pb`, else its highest integer version folder."""
    path = Path(path)
    if (path / "saved_model.pb").is_file():
        return path
    if not path.is_dir():
        raise FileNotFoundError(f"No SavedModel at {path}")
    version = next_version(path) - 1
    if version < 1:
        raise FileNotFoundError(f"No SavedModel at {path}: no saved_model.pb and no integer version folders")
    return path / str(version)
