"""The two models of benchmarks/multi30k.py, as a worker configures, builds and decodes them.

    ours        `build_transformer(preset(--preset, ...))`, with our model's flags (`--recipe`,
                `--embedding-sharing`, `--dropout`, ...)
    keras-hub   `KerasHubTransformer` (benchmarks/peers.py): keras-hub's `TokenAndPositionEmbedding`,
                `TransformerEncoder` and `TransformerDecoder` at the same width, heads, feed-forward
                width, depth, dropout and vocabularies, with three embedding tables

Both are compiled by `keras_transformer.training.compile_transformer` (masked label-smoothed loss,
Adam(0.9, 0.98, 1e-9) on the Noam schedule) from the worker's `TrainConfig`, which gives weight
averaging and the learning-rate cooldown to ours only: keras-hub's model trains as its layers
come. The configs are saved in the worker's folder, where `--export-dir`'s export reads them.

Each model comes with a translator factory. Ours decodes through the same `Translator` graph that
`--export-dir` saves, greedily or by beam search; keras-hub's greedily (`KerasHubTranslator`:
`keras_hub.samplers.GreedySampler` with key/value caches, stopping once every sentence has
produced `</s>`).
"""

import tensorflow as tf
from multi30k_data import split_paths, worker_dir
from peers import KerasHubTransformer

from keras_transformer.config import TrainConfig, preset
from keras_transformer.data.tokenizers import END_ID, PAD_ID
from keras_transformer.models import build_transformer
from keras_transformer.runs import MODEL_CONFIG_FILE, make_translator
from keras_transformer.training import compile_transformer


def worker_train_config(args, name):
    """The `TrainConfig` of a worker.

    It holds the loss, optimizer and schedule settings for `compile_transformer`, and the corpus
    files and decoding settings for the export.
    """
    return TrainConfig(
        preset=args.preset,
        corpus="files",
        train_files=tuple(map(str, split_paths(args.data, "train"))),
        validation_files=tuple(map(str, split_paths(args.data, "validation"))),
        test_files=tuple(map(str, split_paths(args.data, "test"))),
        train_size=args.train_size,
        source_vocab_size=args.vocab,
        target_vocab_size=args.vocab,
        joint_vocab=args.joint_vocab == "on",
        steps_per_epoch=args.chunk_steps,
        batch_size=args.batch_size,
        batch_tokens=args.batch_tokens,
        warmup_steps=args.warmup,
        learning_rate_scale=args.lr_scale,
        label_smoothing=args.label_smoothing,
        precision=args.policy,
        ema_momentum=args.ema_momentum if name == "ours" else 0.0,
        ema_ramp=args.ema_ramp,
        lr_cooldown=args.lr_cooldown if name == "ours" else 0.0,
        seed=args.seed,
        run_dir=str(worker_dir(args, name)),
        export_dir=args.export_dir or "saved_models",
        beam_size=args.beam_size,
        length_penalty=args.length_penalty,
    ).validate()


def save_worker_configs(args, name, data, run_dir):
    """Make the worker's configs and save them into `run_dir`, where the export reads them.

    Returns:
        `(model_config, train_config)`: the `ModelConfig` at `--preset` with the vocabularies'
        sizes, and `worker_train_config`.
    """
    model_config = preset(
        args.preset,
        source_vocab_size=data.source_tokenizer.vocab_size,
        target_vocab_size=data.target_tokenizer.vocab_size,
        max_source_len=args.max_len,
        max_target_len=args.max_len,
        attention_initialization=args.attention_initialization,
        embedding_sharing=args.embedding_sharing if name == "ours" else "none",
        **({"dropout_rate": args.dropout} if name == "ours" and args.dropout is not None else {}),
        **(
            {"attention_residual_dropout_rate": args.attention_residual_dropout}
            if name == "ours" and args.attention_residual_dropout is not None
            else {}
        ),
    )
    model_config.save(run_dir / MODEL_CONFIG_FILE)
    train_config = worker_train_config(args, name)
    train_config.save(run_dir / "train_config.json")
    return model_config, train_config


def build_worker_model(args, name, model_config, train_config, data, run_dir):
    """Model `name`, compiled by `compile_transformer`, and its translator factory.

    Returns:
        `(model, translator)`: `translator(beam_size, length_penalty=None)` gives an object with
        our `Translator`'s `translate` (the keras-hub peer decodes greedily only: `beam_size` 1).
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

        def translator(beam_size):
            assert beam_size == 1, "the keras-hub peer decodes greedily"
            return KerasHubTranslator(hub, data.source_tokenizer, data.target_tokenizer, args.max_len, args.max_len)

    compile_transformer(model, model_config, train_config)
    model.jit_compile = args.jit
    return model, translator


class KerasHubTranslator:
    """Text to text with the keras-hub peer: our tokenizers around its cached greedy generation.

    `translate` has the interface of our `Translator`'s (`string[B]` -> `{"translation":
    string[B]}`), traced once for any batch size. Sources longer than `max_source_len` pieces
    are cut (the peer's position table has that many rows); generation stops once every
    sentence has produced `</s>`, or after `max_target_len` tokens.
    """

    def __init__(self, hub, source_tokenizer, target_tokenizer, max_source_len, max_target_len):
        self.hub = hub
        self.source_tokenizer, self.target_tokenizer = source_tokenizer, target_tokenizer
        self.max_source_len, self.max_target_len = max_source_len, max_target_len
        self.translate = tf.function(self._translate, input_signature=[tf.TensorSpec([None], tf.string)])

    def _translate(self, text):
        pieces = self.source_tokenizer.tokenize(text)  # (B, (S))
        source_ids = pieces[:, : self.max_source_len].to_tensor(default_value=PAD_ID)  # (B, S)
        output_ids = self.hub.generate(source_ids, self.max_target_len, end_id=END_ID)  # (B, L)
        return {"translation": self.target_tokenizer.detokenize(output_ids)}
