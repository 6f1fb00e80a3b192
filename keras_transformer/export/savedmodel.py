"""SavedModel export in TF Serving's layout: raw text in, translation out, all in the graph.

    EXPORT_DIR/models.config                          model server config listing every model here
    EXPORT_DIR/MODEL_NAME/1/saved_model.pb
                           /variables/...
                           /assets/source_vocab.txt, target_vocab.txt, model_config.json
                           /assets.extra/tf_serving_warmup_requests
    EXPORT_DIR/MODEL_NAME/2/...   (the highest integer version is served)

Two kinds of export, because a SavedModel is loaded whole (one unknown op fails the load):

- the text export (`Translator`), which needs a model server with tensorflow-text ops (the stock
  TF Serving 2.12+ has them):
    `serving_default`: `text: string[B]` -> `translation: string[B]`, `score: float32[B]`,
        `truncated: bool[B]`
    `translate_ids`:   `source_ids: int32[B, S]` -> `output_ids: int32[B, L]`, `score`, `truncated`
- the ids-only export (`IdsTranslator`), core TensorFlow ops only, for servers built without
  tensorflow-text; its `serving_default` is `translate_ids`, and the vocabularies ride along as
  assets for the client to tokenize with.

Defined results for awkward input: a text with no tokens (empty, whitespace only) and a row of
ids that is all padding translate to `""` / all padding with score 0; input longer than the
model's `max_source_len` is cut to it and flagged `truncated`; so is a text longer than
`MAX_TEXT_BYTES` bytes, of which only the first `MAX_TEXT_BYTES` are read (that bounds the time
of one text); invalid UTF-8 bytes are replaced (U+FFFD) and unknown characters become `<unk>`
before translation; an empty batch gives empty outputs; ids outside the vocabulary are rejected
with an `InvalidArgumentError` naming them.

Decoding (beam size, length penalty, output length `max_target_len`) is fixed at export time.
A new version is written to a staging folder beside the versions and renamed into place, so a
model server never sees half a model.

Language models are exported the same way (`export_module`, the same layout, versions, warm-up
requests and models.config):

- a causal language model (`TextGenerator`, tensorflow-text ops):
    `serving_default`: `prompt: string[B]` -> `continuation: string[B]`, `output_ids: int32[B, L]`,
        `truncated: bool[B]`; the prompt is tokenized, `<s>` put in front, continued by cached
        generation with the sampler chosen at export time (greedy by default; a sampling one
        with its seed, so that a freshly loaded export samples the same continuations), and the
        generated tokens (up to `</s>`) detokenized;
    `generate_ids`:    `prompt_ids: int32[B, P]` -> `output_ids: int32[B, L]`, `truncated: bool[B]`;
  and its ids-only export (`IdsGenerator`, core ops only), whose `serving_default` is `generate_ids`.
  `L` is the model's `max_length`, prompt included; a prompt is cut to `L - 1` tokens (flagged
  `truncated`), so that at least one token is generated.
- a masked language model (`MaskFiller`, core ops only):
    `serving_default`: `token_ids: int32[B, T]` -> `filled_ids: int32[B, T']` (each `<mask>` replaced
        by the likeliest text piece, the other ids kept), `logits: float32[B, T', V]`,
        `truncated: bool[B]`; `T'` is `T` cut to the model's `max_length`.
"""

import os
import re
import shutil
import tempfile
from pathlib import Path

import tensorflow as tf

from keras_transformer.data.tokenizers import PAD_ID, START_ID
from keras_transformer.decoding import beam_search, greedy_decode

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


class _ExportModule(tf.Module):
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


def _checked_ids(ids, vocab_size, name):
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


class IdsTranslator(_ExportModule):
    """Token ids to token ids, in core TensorFlow ops only (the ids-only export).

    Args:
        model: a trained model from `build_transformer`.
        model_config: its `ModelConfig` (`max_source_len` truncates inputs, `max_target_len`
            bounds outputs, `source/target_vocab_size` bound the ids).
        config_path: the `model_config.json` to ship as an asset.
        vocab_paths: the source and target vocabulary files to ship as assets.
        beam_size: int, 1 for greedy decoding.
        length_penalty: float, the beam search's GNMT alpha.
    """

    def __init__(self, model, model_config, config_path, vocab_paths=(), beam_size=4, length_penalty=0.6):
        if not isinstance(beam_size, int) or beam_size < 1:
            raise ValueError(f"`beam_size` must be a positive int. Received: beam_size={beam_size}")
        super().__init__(model, model_config, config_path, vocab_paths, name="translator")
        self.beam_size = beam_size
        self.length_penalty = length_penalty

    def signatures(self):
        """`{signature name: tf.function}` to save."""
        return {SIGNATURE_KEY: self.translate_ids}

    # autograph=False here and below: the graphs have explicit control flow (ops.while_loop, ops.cond),
    # so converting their Python source would only add tracing time (3.8 s of CPU in a tiny `train`).
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")], autograph=False)
    def translate_ids(self, source_ids):
        """Translates token ids: `source_ids: int32[B, S]` (0 = padding) -> a dict of outputs.

        The outputs: `{"output_ids": int32[B, L], "score": float32[B], "truncated": bool[B]}`;
        `L` is `max_target_len`.
        """
        source_ids = _checked_ids(source_ids, self.model_config.source_vocab_size, "source_ids")
        max_source_len = self.model_config.max_source_len
        truncated = tf.reduce_any(tf.not_equal(source_ids[:, max_source_len:], PAD_ID), axis=1)
        return {**self._decode(source_ids[:, :max_source_len]), "truncated": truncated}

    def _decode(self, source_ids):
        """int32 `[B, S <= max_source_len]` -> `{"output_ids": [B, L], "score": [B]}`."""
        # At least one source position, so that a batch of empty inputs still has keys.
        source_ids = tf.pad(source_ids, [[0, 0], [0, tf.maximum(1 - tf.shape(source_ids)[1], 0)]])
        max_length = self.model_config.max_target_len
        if self.beam_size == 1:
            output_ids, scores = greedy_decode(self.model, source_ids, max_length)
        else:
            output_ids, scores = beam_search(self.model, source_ids, max_length, self.beam_size, self.length_penalty)
        empty = tf.reduce_all(tf.equal(source_ids, PAD_ID), axis=1)  # (B,): nothing to translate
        return {
            "output_ids": tf.where(empty[:, None], PAD_ID, output_ids),
            "score": tf.where(empty, 0.0, scores),
        }


class Translator(IdsTranslator):
    """Text to text: tensorflow-text tokenization, decoding and detokenization in one graph.

    Args:
        model, model_config, config_path, beam_size, length_penalty: see `IdsTranslator`.
        source_tokenizer, target_tokenizer: `SubwordTokenizer`s of the run (their vocabularies
            are saved as assets).
    """

    def __init__(
        self, model, model_config, source_tokenizer, target_tokenizer, config_path, beam_size=4, length_penalty=0.6
    ):
        super().__init__(model, model_config, config_path, (), beam_size, length_penalty)
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer

    def signatures(self):
        return {SIGNATURE_KEY: self.translate, IDS_SIGNATURE_KEY: self.translate_ids}

    def ids_only(self):
        """The `IdsTranslator` of the same model and decoding settings, for the ids-only export."""
        vocab_paths = (self.source_tokenizer.vocab_path, self.target_tokenizer.vocab_path)
        return IdsTranslator(
            self.model,
            self.model_config,
            self._config_path,
            vocab_paths,
            self.beam_size,
            self.length_penalty,
        )

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def translate(self, text):
        """Translates text: `text: string[B]` -> a dict of outputs.

        The outputs: `{"translation": string[B], "score": float32[B], "truncated": bool[B]}`.
        `truncated` is true where the text has more than `max_source_len` tokens or more than
        `MAX_TEXT_BYTES` bytes: only its beginning was translated.
        """
        too_long = tf.strings.length(text) > MAX_TEXT_BYTES  # (B,)
        text = tf.strings.substr(text, 0, MAX_TEXT_BYTES)  # a character cut in two reads as U+FFFD
        max_source_len = self.model_config.max_source_len
        # One word more than fits: every word gives at least one piece, so that extra word
        # shows whether the text is longer than `max_source_len` pieces.
        pieces = self.source_tokenizer.tokenize(text, max_words=max_source_len + 1)  # (B, (S))
        truncated = tf.logical_or(too_long, pieces.row_lengths() > max_source_len)
        source_ids = pieces[:, :max_source_len].to_tensor(default_value=PAD_ID)  # (B, S), S <= max_source_len
        # Through the ids signature's function: one decoder graph in the SavedModel (and one trace
        # when saving), shared by both signatures.
        outputs = self.translate_ids(source_ids)
        return {
            "translation": self.target_tokenizer.detokenize(outputs["output_ids"]),
            "score": outputs["score"],
            "truncated": truncated,
        }


class IdsGenerator(_ExportModule):
    """Prompt ids to prompt and continuation ids by cached generation, in core TensorFlow ops only.

    Args:
        model, model_config, config_path, vocab_paths: see `_ExportModule`; `model` from
            `build_decoder_only`.
        sampler: a name of `generation.SAMPLERS`: "greedy", "beam", "top_k", "top_p", "random".
        seed: int, the seed of a sampler that draws at random: its seed generator's state is a
            variable of the export, so that every freshly loaded export samples alike.
        **options: the sampler's options (`num_beams`, `k`, `p`, `temperature`).
    """

    def __init__(self, model, model_config, config_path, vocab_paths=(), sampler="greedy", seed=0, **options):
        super().__init__(model, model_config, config_path, vocab_paths, name="generator")
        if model_config.max_length < 2:
            raise ValueError(f"Generation needs max_length >= 2. Received: max_length={model_config.max_length}")
        from keras_transformer.decoding.generation import get_sampler  # imports keras-hub: only for a language model

        # Built once, outside the traced function (a sampler made inside would make a new variable per trace).
        sampler_object = get_sampler(sampler, seed, **options)
        object.__setattr__(self, "sampler", sampler_object)  # untracked: only its state is saved
        generator = getattr(sampler_object, "seed_generator", None)
        self.sampler_state = [] if generator is None else [generator.state.value]
        self.sampler_settings = dict(sampler=sampler, seed=seed, **options)

    def signatures(self):
        """`{signature name: tf.function}` to save."""
        return {SIGNATURE_KEY: self.generate_ids}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="prompt_ids")], autograph=False)
    def generate_ids(self, prompt_ids):
        """Continues prompts given as ids: `prompt_ids: int32[B, P]`, right-padded with 0.

        A prompt should start with `<s>` (id 2), as the training texts do; a row of padding
        only starts from `<s>`.

        Returns:
            `{"output_ids": int32[B, L], "truncated": bool[B]}`: each prompt, cut to `L - 1`
            tokens, then its continuation, padding (0) after a generated `</s>`; `truncated`
            where the prompt was cut. `L` is the model's `max_length`.
        """
        prompt_ids = _checked_ids(prompt_ids, self.model_config.vocab_size, "prompt_ids")
        room = self.model_config.max_length - 1
        truncated = tf.reduce_any(tf.not_equal(prompt_ids[:, room:], PAD_ID), axis=1)
        return {"output_ids": self._generate(prompt_ids[:, :room]), "truncated": truncated}

    def _generate(self, prompt_ids):
        """int32 `[B, P < L]` -> int32 `[B, L]`, the prompts and their continuations."""
        from keras_transformer.decoding.generation import generate

        return generate(self.model, prompt_ids, self.model_config.max_length, sampler=self.sampler)


class TextGenerator(IdsGenerator):
    """Prompt text to continuation text: tokenization, cached generation and detokenization in one graph.

    Args:
        model, model_config, config_path, sampler, seed, **options: see `IdsGenerator`.
        tokenizer: the run's `SubwordTokenizer` (its vocabulary is saved as an asset).
    """

    def __init__(self, model, model_config, tokenizer, config_path, sampler="greedy", seed=0, **options):
        super().__init__(model, model_config, config_path, (), sampler, seed, **options)
        self.tokenizer = tokenizer

    def signatures(self):
        return {SIGNATURE_KEY: self.generate, GENERATE_IDS_SIGNATURE_KEY: self.generate_ids}

    def ids_only(self):
        """The `IdsGenerator` of the same model and sampler, for the ids-only export."""
        return IdsGenerator(
            self.model, self.model_config, self._config_path, (self.tokenizer.vocab_path,), **self.sampler_settings
        )

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="prompt")], autograph=False)
    def generate(self, prompt):
        """Continues text: `prompt: string[B]` -> a dict of outputs.

        The outputs: `{"continuation": string[B], "output_ids": int32[B, L], "truncated": bool[B]}`:
        the generated text after the prompt (up to `</s>`), `<s>`, the prompt's ids and the
        generated ones, and whether the prompt was cut (more than `L - 2` pieces or
        `MAX_TEXT_BYTES` bytes: only its beginning was continued).
        """
        too_long = tf.strings.length(prompt) > MAX_TEXT_BYTES  # (B,)
        prompt = tf.strings.substr(prompt, 0, MAX_TEXT_BYTES)
        room = self.model_config.max_length - 2  # pieces after <s>, leaving one position to generate
        pieces = self.tokenizer.tokenize(prompt, max_words=room + 1)  # (B, (P)); see `Translator.translate`
        truncated = tf.logical_or(too_long, pieces.row_lengths() > room)
        starts = tf.fill([pieces.nrows(), 1], tf.constant(START_ID, tf.int32))
        prompt_ids = tf.concat([starts, pieces[:, :room]], axis=1).to_tensor(default_value=PAD_ID)  # (B, P)
        output_ids = self.generate_ids(prompt_ids)["output_ids"]  # (B, L); one generation graph, as in `Translator`
        extra = tf.shape(output_ids)[1] - tf.shape(prompt_ids)[1]
        in_prompt = tf.pad(tf.not_equal(prompt_ids, PAD_ID), [[0, 0], [0, extra]])  # (B, L)
        generated = tf.where(in_prompt, PAD_ID, output_ids)  # (B, L)
        return {
            "continuation": self.tokenizer.detokenize(generated),
            "output_ids": output_ids,
            "truncated": truncated,
        }


class MaskFiller(_ExportModule):
    """Token ids with `<mask>`s to the masked language model's fill-in, in core TensorFlow ops only.

    Args:
        model, model_config, config_path, vocab_paths: see `_ExportModule`; `model` from
            `build_encoder_only`, without a classification head.
        mask_id: the id of `<mask>`.
        num_reserved: the number of reserved ids; a mask is filled with a text piece, never one of them.
    """

    def __init__(self, model, model_config, config_path, vocab_paths, mask_id, num_reserved):
        super().__init__(model, model_config, config_path, vocab_paths, name="mask_filler")
        self.mask_id = int(mask_id)
        self.num_reserved = int(num_reserved)

    def signatures(self):
        """`{signature name: tf.function}` to save."""
        return {SIGNATURE_KEY: self.fill_masks}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="token_ids")], autograph=False)
    def fill_masks(self, token_ids):
        """Fills the masks of `token_ids: int32[B, T]`, right-padded with 0, `<s>` first as in training.

        Returns:
            `{"filled_ids": int32[B, T'], "logits": float32[B, T', V], "truncated": bool[B]}`:
            the ids with each `<mask>` replaced by its likeliest text piece, the model's logits
            at every position, and where a row was longer than `T' = min(T, max_length)`.
        """
        token_ids = _checked_ids(token_ids, self.model_config.vocab_size, "token_ids")
        max_length = self.model_config.max_length
        truncated = tf.reduce_any(tf.not_equal(token_ids[:, max_length:], PAD_ID), axis=1)
        token_ids = token_ids[:, :max_length]
        logits = tf.cast(self.model(token_ids, training=False), tf.float32)  # (B, T', V)
        is_piece = tf.range(self.model_config.vocab_size) >= self.num_reserved  # (V,)
        best = tf.argmax(tf.where(is_piece, logits, float("-inf")), axis=-1, output_type=tf.int32)  # (B, T')
        filled = tf.where(tf.equal(token_ids, self.mask_id), best, token_ids)
        return {"filled_ids": filled, "logits": logits, "truncated": truncated}


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
        warmup_inputs: optional `{signature name: {input name: array}}`; each becomes a warm-up
            request in `assets.extra/tf_serving_warmup_requests`, which TF Serving replays
            before it serves the version (so the first user does not wait for graph set-up).

    Returns:
        `Path` of the new version folder.
    """
    model_dir = Path(export_dir) / model_name
    model_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=model_dir))
    try:
        tf.saved_model.save(module, str(staging), signatures=module.signatures())
        if warmup_inputs:
            write_warmup_requests(staging / WARMUP_FILE, model_name, warmup_inputs)
        while True:
            version_dir = model_dir / str(next_version(model_dir))
            try:
                os.rename(staging, version_dir)  # atomic; fails if another writer took the number
                break
            except OSError:
                if not version_dir.exists():
                    raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    write_models_config(export_dir)
    return version_dir


def export_translator(translator, export_dir, model_name, warmup_inputs=None):
    """`export_module` of a `Translator` or an `IdsTranslator` (the name the translation export always had)."""
    return export_module(translator, export_dir, model_name, warmup_inputs)


def write_warmup_requests(path, model_name, warmup_inputs):
    """Write `PredictionLog` warm-up records (TF Serving's format) for each signature's inputs."""
    from tensorflow_serving.apis import prediction_log_pb2

    from keras_transformer.export.clients import predict_request

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for signature_name, inputs in warmup_inputs.items():
            request = predict_request(model_name, inputs, signature_name=signature_name)
            log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(log.SerializeToString())


def write_models_config(export_dir, serving_root="/models"):
    """Write `export_dir/models.config`, the model server's `--model_config_file`.

    It lists every model folder under `export_dir` that holds versions, at `serving_root/<name>`
    (where the Docker command in docs/serving.md mounts `export_dir`). Replaced atomically.

    Args:
        export_dir: export root, one folder per model.
        serving_root: where the model server sees `export_dir`.

    Returns:
        `Path` of the file.
    """
    export_dir = Path(export_dir)
    names = sorted(p.name for p in export_dir.iterdir() if p.is_dir() and _versions(p))
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
