"""The CTranslate2 export: a translation run's weights for that engine, and text translated with them.

    EXPORT_DIR/MODEL_NAME_ctranslate2/1/model.bin            the engine's weights (float32)
                                       /config.json, source_vocabulary.json, target_vocabulary.json
                                       /assets/source_vocab.txt, target_vocab.txt, model_config.json
                                       /translation_options.json   the run's decoding settings
                                       /checksums.sha256

A version is written the way a SavedModel version is (a staging folder, checksums last, renamed
into place) and read the same way (`latest_version_dir(..., export_format="ctranslate2")` passes
over damaged versions); `models.config` does not list it, as TF Serving cannot load it.

`CTranslate2Translator` translates text with a version: the run's own tokenizers (the same
pieces, the same cut at `max_source_len`, the same `truncated` flags as the SavedModel's text
signature), the engine between them. Its outputs are our model's: greedy and beam search give the
same translations where the length penalty is 0 (the tests hold it on the built-in corpus). The
engine's length penalty is another formula (the score divided by `length ** penalty`, where ours
divides by GNMT's `((5 + length) / 6) ** alpha`), so the export always ranks hypotheses by
log-probability, `length_penalty` 0, whatever the run's `--length-penalty`.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import tensorflow as tf

from keras_transformer.checks import check_choice, check_int
from keras_transformer.config import ModelConfig
from keras_transformer.data.special_tokens import PAD_ID, RESERVED_TOKENS, START_ID
from keras_transformer.data.tokenizers import SubwordTokenizer
from keras_transformer.data.vocabulary import read_vocabulary
from keras_transformer.export.integrity import EXPORT_FORMATS
from keras_transformer.export.savedmodel import publish_version
from keras_transformer.export.translation import source_ids_of_text
from keras_transformer.files import staging_folder
from keras_transformer.models.ctranslate2_spec import import_ctranslate2, transformer_spec

MODEL_FILE, _ = EXPORT_FORMATS["ctranslate2"]  # "model.bin", the engine's weights
FOLDER_SUFFIX = "_ctranslate2"  # the model folder: EXPORT_DIR/MODEL_NAME_ctranslate2
OPTIONS_FILE = "translation_options.json"
ASSETS = "assets"
COMPUTE_TYPES = ("default", "float32", "int8", "int8_float32")  # what `CTranslate2Translator` offers on CPUs
# Never emitted, as in `keras_transformer.decoding` (`forbid_never_emitted`): padding and <s>; <unk>
# by the engine's `disable_unk`.
_SUPPRESSED = [[RESERVED_TOKENS[PAD_ID]], [RESERVED_TOKENS[START_ID]]]


def is_ctranslate2_export(path):
    """Whether `path` is a CTranslate2 export: a version folder holding `model.bin`, or a model folder of them."""
    path = Path(path)
    if (path / MODEL_FILE).is_file():
        return True
    return path.is_dir() and any(
        (child / MODEL_FILE).is_file() for child in path.iterdir() if child.is_dir() and child.name.isdigit()
    )


class EngineError(RuntimeError):
    """CTranslate2 failed on a batch; the message is the engine's."""


def save_ctranslate2_model(model, model_config, source_vocab_path, target_vocab_path, folder):
    """Write the engine's files of a trained model into `folder` (made if missing; it must be empty).

    Args:
        model: a trained model from `build_transformer`.
        model_config: its `ModelConfig`.
        source_vocab_path: the run's source vocabulary file (one token per line, by id).
        target_vocab_path: the run's target vocabulary file.
        folder: the folder to make.

    Returns:
        `Path` of `folder`.

    Raises:
        FileExistsError: `folder` holds files.
        UnsupportedModelError: a model the engine cannot run (`models.conversion_problems`).
        ImportError: CTranslate2 is not installed (the message says how to install it).
    """
    folder = Path(folder)
    if folder.is_dir() and any(folder.iterdir()):
        raise FileExistsError(f"{folder} is not empty: the engine's files go into a new or empty folder")
    spec = transformer_spec(model, model_config, read_vocabulary(source_vocab_path), read_vocabulary(target_vocab_path))
    spec.optimize(quantization=None)  # float32 weights: the engine quantizes at load (`compute_type`)
    folder.mkdir(parents=True, exist_ok=True)
    spec.save(str(folder))
    return folder


def export_ctranslate2(
    model, model_config, source_tokenizer, target_tokenizer, config_path, export_dir, model_name, beam_size
):
    """Export a trained translation model as the next version of `EXPORT_DIR/MODEL_NAME_ctranslate2`.

    Args:
        model: a trained model from `build_transformer`.
        model_config: its `ModelConfig`.
        source_tokenizer: the run's source `SubwordTokenizer` (its vocabulary and typing
            normalization are exported).
        target_tokenizer: the run's target `SubwordTokenizer`.
        config_path: the run's `model_config.json`.
        export_dir: export root.
        model_name: the run's model name; the folder is `model_name + "_ctranslate2"`.
        beam_size: int, the beam size `CTranslate2Translator` decodes with (1 is greedy).

    Returns:
        `Path` of the new version folder.

    Raises:
        UnsupportedModelError, ImportError: as `save_ctranslate2_model`.
    """
    check_int("beam_size", beam_size, 1)
    model_dir = Path(export_dir) / f"{model_name}{FOLDER_SUFFIX}"
    with staging_folder(model_dir) as staging:
        version = save_ctranslate2_model(
            model, model_config, source_tokenizer.vocab_path, target_tokenizer.vocab_path, staging
        )
        assets = version / ASSETS
        assets.mkdir()
        shutil.copyfile(source_tokenizer.vocab_path, assets / "source_vocab.txt")
        shutil.copyfile(target_tokenizer.vocab_path, assets / "target_vocab.txt")
        shutil.copyfile(config_path, assets / "model_config.json")
        options = {
            "beam_size": beam_size,
            "length_penalty": 0.0,
            "max_input_length": model_config.max_source_len,
            "max_decoding_length": model_config.max_target_len,
            "normalize_source_typing": bool(source_tokenizer.normalize_typing),
        }
        (version / OPTIONS_FILE).write_text(json.dumps(options, indent=2) + "\n")
        return publish_version(version, model_dir)


class CTranslate2Translator:
    """Text to text with a CTranslate2 export version: the run's tokenizers around the engine.

    Args:
        version_dir: a version folder written by `export_ctranslate2` (see
            `latest_version_dir(..., export_format="ctranslate2")` to find the newest intact one).
        compute_type: `"default"` (the weights as saved, float32), `"float32"`, `"int8"` or
            `"int8_float32"` (8-bit weights, quantized when loading).
        intra_threads: threads of one translation (0: the engine's default, which is all cores).
            Measure it on your CPU (`benchmarks.speed.decode`): on 2 cores of a Zen 4 EPYC float32
            was fastest with 2 and int8 with 1, and int8 with 2 was over 10 times slower; the
            default, 1, is never that slow setting.
        beam_size: int or None (the export's).

    Call `translate(texts)` with a list of `str` or `bytes`.
    """

    def __init__(self, version_dir, compute_type="default", intra_threads=1, beam_size=None):
        ctranslate2 = import_ctranslate2()
        check_choice("compute_type", compute_type, COMPUTE_TYPES)
        check_int("intra_threads", intra_threads, 0)
        if beam_size is not None:
            check_int("beam_size", beam_size, 1)
        version_dir = Path(version_dir)
        assets = version_dir / ASSETS
        options = json.loads((version_dir / OPTIONS_FILE).read_text())
        self.model_config = ModelConfig.load(assets / "model_config.json")
        self.beam_size = options["beam_size"] if beam_size is None else beam_size
        self.length_penalty = float(options["length_penalty"])
        self.source_tokenizer = SubwordTokenizer(
            str(assets / "source_vocab.txt"),
            name="source_tokenizer",
            normalize_typing=options["normalize_source_typing"],
        )
        self.target_tokenizer = SubwordTokenizer(str(assets / "target_vocab.txt"), name="target_tokenizer")
        self.source_tokens = read_vocabulary(assets / "source_vocab.txt")
        self.target_ids = {token: i for i, token in enumerate(read_vocabulary(assets / "target_vocab.txt"))}
        self.engine = ctranslate2.Translator(
            str(version_dir), device="cpu", compute_type=compute_type, intra_threads=intra_threads
        )

    def translate_ids(self, source_ids):
        """Token ids to token ids, as the SavedModel's `translate_ids` signature.

        Args:
            source_ids: int `[B, S]`, 0 = padding, at most `max_source_len` ids used.

        Returns:
            `{"output_ids": int32 [B, max_target_len] (</s> then padding), "score": float32 [B]}`;
            a row of padding only gives padding and score 0.

        Raises:
            EngineError: the engine failed on the batch.
        """
        source_ids = np.asarray(source_ids)[:, : self.model_config.max_source_len]
        rows = [[self.source_tokens[i] for i in row if i != PAD_ID] for row in source_ids]
        length = self.model_config.max_target_len
        output_ids = np.zeros((len(rows), length), np.int32)
        scores = np.zeros((len(rows),), np.float32)
        real = [i for i, row in enumerate(rows) if row]
        if real:
            try:
                results = self.engine.translate_batch(
                    [rows[i] for i in real],
                    beam_size=self.beam_size,
                    length_penalty=self.length_penalty,
                    max_input_length=self.model_config.max_source_len,
                    max_decoding_length=length,
                    min_decoding_length=0,  # </s> may come first, as in our decoders
                    disable_unk=True,
                    suppress_sequences=_SUPPRESSED,
                    return_end_token=True,
                    return_scores=True,
                )
            except (RuntimeError, ValueError) as error:
                raise EngineError(str(error)) from None
            for i, result in zip(real, results):
                ids = [self.target_ids[token] for token in result.hypotheses[0]][:length]
                output_ids[i, : len(ids)] = ids
                scores[i] = result.scores[0]
        return {"output_ids": output_ids, "score": scores}

    def text_signature(self, text):
        """`translate` in the shape of the SavedModel's text signature: string tensor `[B]` -> dict of tensors."""
        outputs = self.translate(text.numpy().tolist())
        return {name: tf.constant(value) for name, value in outputs.items()}

    def translate(self, texts):
        """Translate texts, as the SavedModel's text signature does.

        Args:
            texts: list of `str` or UTF-8 `bytes` (invalid bytes read as U+FFFD).

        Returns:
            `{"translation": list of bytes, "score": float32 [B], "truncated": bool [B]}`.
        """
        source_ids, truncated = source_ids_of_text(
            self.source_tokenizer, tf.constant(list(texts), tf.string), self.model_config.max_source_len
        )
        outputs = self.translate_ids(source_ids.numpy())
        translations = self.target_tokenizer.detokenize(tf.constant(outputs["output_ids"])).numpy().tolist()
        return {"translation": translations, "score": outputs["score"], "truncated": truncated.numpy()}
