"""The two models of the Multi30k study, as a worker configures, builds and decodes them.

    ours        `build_transformer(preset(--preset, ...))`, with our model's flags (`--recipe`,
                `--embedding-sharing`, `--dropout-rate`, ...)
    keras-hub   `KerasHubTransformer` (`benchmarks.harness.peers`): keras-hub's
                `TokenAndPositionEmbedding`, `TransformerEncoder` and `TransformerDecoder` at the same
                width, heads, feed-forward width, depth, dropout and vocabularies, with three
                embedding tables

Both are compiled by `keras_transformer.training.compile_transformer` (masked label-smoothed loss,
Adam(0.9, 0.98, 1e-9) on the Noam schedule) from the worker's `TrainConfig`, which gives weight
averaging and the learning-rate cooldown to ours only: keras-hub's model trains as its layers
come. The configs (`train_settings`, `model_settings`: the fields each model's worker sets beside
the flags) are saved in the worker's folder, where `--export-dir`'s export reads them.

Each model comes with a translator factory, `translator(beam_size, length_penalty=None)`, greedy
at beam size 1. Ours decodes through the same `Translator` graph that `--export-dir` saves
(greedy, or our beam search with its GNMT length penalty); keras-hub's through its own
generation, `KerasHubTransformer.generate` (`KerasHubTranslator`: `keras_hub.samplers.GreedySampler`,
or `BeamSampler(beam_size)`, which ranks by summed log-probability with no length penalty, with
key/value caches, stopping once every sentence has produced `</s>`).
"""

import dataclasses

import tensorflow as tf

from benchmarks.harness.peers import KerasHubTransformer
from benchmarks.translation.multi30k.data import split_paths, vocabulary_sizes, worker_dir
from keras_transformer.config import PRESETS, ModelConfig, TrainConfig
from keras_transformer.data.tokenizers import END_ID, PAD_ID
from keras_transformer.models import build_transformer
from keras_transformer.runs import MODEL_CONFIG_FILE, make_translator
from keras_transformer.training import compile_transformer


def flag_fields(args, config_class):
    """The flags of `args` named after fields of `config_class` (those `flags.config_from_flags` reads)."""
    names = {field.name for field in dataclasses.fields(config_class)}
    return {name: value for name, value in vars(args).items() if name in names}


def train_settings(args, name):
    """The `TrainConfig` fields that worker `name` sets beside the flags.

    The corpus files and the worker's folder; the vocabularies' sizes (the joint one's on both
    sides); the policy the parent chose; weight averaging and the cooldown for ours only; the
    export folder (`saved_models` when none is asked for).
    """
    source_vocab_size, target_vocab_size = vocabulary_sizes(args)
    return dict(
        corpus="files",
        source_vocab_size=source_vocab_size,
        target_vocab_size=target_vocab_size,
        train_files=tuple(map(str, split_paths(args.data, "train"))),
        validation_files=tuple(map(str, split_paths(args.data, "validation"))),
        test_files=tuple(map(str, split_paths(args.data, "test"))),
        precision=args.policy,
        ema_momentum=args.ema_momentum if name == "ours" else 0.0,
        lr_cooldown=args.lr_cooldown if name == "ours" else 0.0,
        run_dir=str(worker_dir(args, name)),
        export_dir=args.export_dir or "saved_models",
    )


def worker_train_config(args, name):
    """The `TrainConfig` of a worker: the flags named after its fields and `train_settings`, validated.

    It holds the loss, optimizer and schedule settings for `compile_transformer`, and the corpus
    files and decoding settings for the export.
    """
    return TrainConfig(**{**flag_fields(args, TrainConfig), **train_settings(args, name)}).validate()


def model_settings(args, name, source_vocab_size, target_vocab_size):
    """The `ModelConfig` fields of worker `name` beside the flags: the preset's sizes, the vocabularies' sizes.

    Our model's flags (`--embedding-sharing`, `--dropout-rate`, `--attention-residual-dropout-rate`)
    are ours only: keras-hub's model has three tables and the preset's dropout.
    """
    values = {**PRESETS[args.preset], "source_vocab_size": source_vocab_size, "target_vocab_size": target_vocab_size}
    if name == "ours":
        if args.dropout_rate is not None:
            values["dropout_rate"] = args.dropout_rate
        values["embedding_sharing"] = args.embedding_sharing
    else:
        values.update(embedding_sharing="none", attention_residual_dropout_rate=None)
    return values


def worker_model_config(args, name, source_vocab_size, target_vocab_size):
    """The `ModelConfig` of a worker: the flags named after its fields and `model_settings`, validated."""
    settings = model_settings(args, name, source_vocab_size, target_vocab_size)
    return ModelConfig(**{**flag_fields(args, ModelConfig), **settings}).validate()


def save_worker_configs(args, name, data, run_dir):
    """Make the worker's configs and save them into `run_dir`, where the export reads them.

    Returns:
        `(model_config, train_config)`: the `ModelConfig` at `--preset` with the vocabularies'
        sizes (`worker_model_config`), and `worker_train_config`.
    """
    sizes = (data.source_tokenizer.vocab_size, data.target_tokenizer.vocab_size)
    model_config = worker_model_config(args, name, *sizes)
    model_config.save(run_dir / MODEL_CONFIG_FILE)
    train_config = worker_train_config(args, name)
    train_config.save(run_dir / "train_config.json")
    return model_config, train_config


def build_worker_model(args, name, model_config, train_config, data, run_dir):
    """Model `name`, compiled by `compile_transformer`, and its translator factory.

    Returns:
        `(model, translator)`: `translator(beam_size, length_penalty=None)` gives an object with
        our `Translator`'s `translate`, greedy at beam size 1. Ours decodes with `length_penalty`
        (the run's `--length-penalty` when None); keras-hub's `BeamSampler` has none to give.
    """
    if name == "ours":
        model = build_transformer(model_config)

        def translator(beam_size, length_penalty=None):
            return make_translator(
                model,
                model_config,
                data.source_tokenizer,
                data.target_tokenizer,
                run_dir,
                train_config,
                beam_size=beam_size,
                length_penalty=length_penalty,
            )

    else:
        hub = KerasHubTransformer(model_config)
        model = hub.model

        def translator(beam_size, length_penalty=None):
            if length_penalty is not None:
                raise ValueError(f"keras-hub's BeamSampler has no length penalty. Received: {length_penalty}")
            return KerasHubTranslator(
                hub, data.source_tokenizer, data.target_tokenizer, args.max_source_len, args.max_target_len, beam_size
            )

    compile_transformer(model, model_config, train_config)  # XLA when --jit-compile (train_config.jit_compile)
    return model, translator


class KerasHubTranslator:
    """Text to text with the keras-hub peer: our tokenizers around its cached generation.

    `translate` has the interface of our `Translator`'s (`string[B]` -> `{"translation":
    string[B]}`), traced once for any batch size. Sources longer than `max_source_len` pieces
    are cut (the peer's position table has that many rows); generation
    (`KerasHubTransformer.generate`: keras-hub's `GreedySampler` at `num_beams` 1, its
    `BeamSampler(num_beams)` above) stops once every sentence has produced `</s>`, or after
    `max_target_len` tokens.
    """

    def __init__(self, hub, source_tokenizer, target_tokenizer, max_source_len, max_target_len, num_beams=1):
        self.hub = hub
        self.source_tokenizer, self.target_tokenizer = source_tokenizer, target_tokenizer
        self.max_source_len, self.max_target_len = max_source_len, max_target_len
        self.num_beams = num_beams
        self.translate = tf.function(self._translate, input_signature=[tf.TensorSpec([None], tf.string)])

    def _translate(self, text):
        pieces = self.source_tokenizer.tokenize(text)  # (B, (S))
        source_ids = pieces[:, : self.max_source_len].to_tensor(default_value=PAD_ID)  # (B, S)
        output_ids = self.hub.generate(
            source_ids, self.max_target_len, end_id=END_ID, num_beams=self.num_beams
        )  # (B, L)
        return {"translation": self.target_tokenizer.detokenize(output_ids)}
