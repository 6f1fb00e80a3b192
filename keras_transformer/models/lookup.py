"""A one-layer attention reader of the key-value lookup task, soft or hard.

The model embeds the keys, the values and the query of `keras_transformer.data.lookup`, reads
the values with one `keras_transformer.layers.Attention` (key-value mode: the query addresses
the keys, the values are read) and classifies the context into a value symbol. Everything it
must learn to answer is in the score function: which key embedding a query embedding matches.
So its four trainings differ only in how the score function gets its gradient (`VARIANTS`):

    soft       the weighted average, differentiated exactly
    reinforce  hard attention sampled in training, score-function (REINFORCE) gradient
    gumbel     hard attention sampled in training, straight-through Gumbel-softmax gradient
    argmax     hard attention, argmax also in training: the score function gets no gradient at all
               (a control: it stays at its initialisation)

Hard attention reads the argmax at inference (`training=False`) whatever the variant.
"""

import keras
from keras import ops

from keras_transformer.checks import check_choice
from keras_transformer.layers.reinforce import Reinforce
from keras_transformer.layers.scoring import with_attention_score
from keras_transformer.layers.single_head import Attention

VARIANTS = ("soft", "reinforce", "gumbel", "argmax")
# The estimator of `variant="reinforce"` unless one is given: leave-one-out over 4 reads per
# example, the fastest in steps of those docs/benchmarks/hard-attention.md measures.
DEFAULT_REINFORCE = Reinforce("leave_one_out", samples=4)


@keras.saving.register_keras_serializable(package="keras_transformer")
class KeyValueLookup(keras.Model):
    """Answer a lookup query with one soft or hard attention read.

    With `variant="reinforce"` the training loss (`compute_loss`) adds to the cross-entropy
    `-log p(answer | v_z)` of the values read the REINFORCE surrogate of `reinforce` (a
    `keras_transformer.layers.reinforce.Reinforce`) for the score function, with the reward
    `R = log p(answer | v_z)` of each read (Xu et al. 2015's lower bound). In training it draws
    `reinforce.samples` reads per example; the cross-entropy averages over them. Its
    `"learned"` baseline is one trainable scalar, its `"value"` baseline a dense head on the
    query's embedding (which the head's regression does not train). The other variants train on
    the cross-entropy alone.

    Args:
        num_keys: int, size of the key alphabet (keys and queries).
        num_values: int, size of the value alphabet: the classes.
        width: int D, the embeddings' width.
        variant: one of `VARIANTS`.
        attention_score: the attention's score function (see `keras_transformer.layers.Attention`).
        temperature: the Gumbel-softmax temperature (`variant="gumbel"`).
        seed: int or None, the sampling noise's seed.
        reinforce: a `Reinforce`, its `get_config()` dict, or None for `DEFAULT_REINFORCE`;
            used by `variant="reinforce"` only.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: dict of int tensors `"keys"` `[B, P]`, `"values"` `[B, P]`, `"query"` `[B]`.
        training: bool; hard attention samples only when True (`"reinforce"`, `"gumbel"`).

    Returns:
        dict: `"logits"` float `[B, num_values]` and `"log_prob"` float `[B]`, log alpha_z of
        the chosen pair (zeros for `"soft"`), of the first read; `"read_logits"` `[S, B,
        num_values]` and `"read_log_prob"` `[S, B]`, of every read (S is `reinforce.samples` in
        training with `"reinforce"`, 1 otherwise); `"weights"` `[B, P]`, the first read's
        attention weights over the pairs (alpha for `"soft"`, the one-hot choice otherwise);
        `"entropy"` `[B]`, the entropy of alpha; and `"value"` `[B]` with the `"value"` baseline.

    Raises:
        ValueError: an unknown `variant` (or a bad attention or estimator argument).
    """

    def __init__(
        self, num_keys=32, num_values=16, width=32, variant="soft", attention_score="dot", temperature=1.0,
        seed=None, reinforce=None, **kwargs,
    ):  # fmt: skip
        super().__init__(**kwargs)
        check_choice("variant", variant, VARIANTS)
        if reinforce is None:
            reinforce = DEFAULT_REINFORCE
        self.reinforce = Reinforce(**reinforce) if isinstance(reinforce, dict) else reinforce
        if not isinstance(self.reinforce, Reinforce):
            raise ValueError(f"`reinforce` must be a Reinforce, its config or None. Received: {reinforce!r}")
        self.num_keys, self.num_values, self.width = num_keys, num_values, width
        self.variant, self.attention_score, self.temperature, self.seed = variant, attention_score, temperature, seed
        self.key_embedding = keras.layers.Embedding(num_keys, width, name="key_embedding")
        self.query_embedding = keras.layers.Embedding(num_keys, width, name="query_embedding")
        self.value_embedding = keras.layers.Embedding(num_values, width, name="value_embedding")
        hard = {"soft": None, "argmax": "argmax"}.get(variant, "sample")
        estimator = "gumbel" if variant == "gumbel" else "reinforce"
        self.attention = Attention(
            attention_score=attention_score,
            hard=hard,
            estimator=estimator,
            temperature=temperature,
            seed=seed,
            name="attention",
        )
        self.output_dense = keras.layers.Dense(num_values, name="output_dense")
        if variant == "argmax":  # no gradient reaches the score function's weights: frozen
            self.key_embedding.trainable = self.query_embedding.trainable = False
        self.baseline = self.value_head = None
        if variant == "reinforce" and self.reinforce.baseline == "learned":
            self.baseline = self.add_weight(shape=(), initializer="zeros", name="baseline")  # b
        if variant == "reinforce" and self.reinforce.baseline == "value":
            self.value_head = keras.layers.Dense(1, name="value_head")  # b(x)

    def call(self, inputs, training=False):
        reads = self.reinforce.samples if (training and self.variant == "reinforce") else 1
        # S reads per example: the batch repeated S times, sample-major, each row sampling its own.
        repeated = {name: ops.tile(ids, (reads,) + (1,) * (len(ids.shape) - 1)) for name, ids in inputs.items()}
        keys = self.key_embedding(repeated["keys"])  # (S * B, P, D)
        values = self.value_embedding(repeated["values"])  # (S * B, P, D)
        query = self.query_embedding(repeated["query"])[:, None, :]  # (S * B, 1, D)
        every_pair = ops.ones(ops.shape(repeated["keys"]), "bool")  # (S * B, P): no padding
        context, weights, log_prob, alpha_entropy = self.attention(
            query,
            keys,
            values,
            queries_mask=every_pair[:, :1],
            keys_mask=every_pair,
            return_attention_scores=True,
            return_log_prob=True,
            return_entropy=True,
            training=training,
        )  # (S * B, 1, D), (S * B, 1, P), (S * B, 1), (S * B, 1)
        batch = ops.shape(inputs["query"])[0]
        logits = ops.reshape(self.output_dense(context[:, 0]), (reads, batch, self.num_values))  # (S, B, V)
        log_prob = ops.reshape(log_prob[:, 0], (reads, batch))  # (S, B)
        outputs = {
            "logits": logits[0],
            "log_prob": log_prob[0],
            "read_logits": logits,
            "read_log_prob": log_prob,
            "weights": weights[:batch, 0],
            "entropy": alpha_entropy[:batch, 0],
        }
        if self.value_head is not None:
            outputs["value"] = self.value_head(ops.stop_gradient(query[:batch, 0]))[:, 0]  # (B,)
        return outputs

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        read_logits = y_pred["read_logits"]  # (S, B, V)
        answers = ops.broadcast_to(ops.convert_to_tensor(y)[None], ops.shape(read_logits)[:2])  # (S, B)
        log_likelihood = -keras.losses.sparse_categorical_crossentropy(answers, read_logits, from_logits=True)
        loss = -ops.mean(log_likelihood)
        if self.variant == "reinforce" and training:
            baseline = self.baseline if self.value_head is None else y_pred["value"]
            loss = loss + self.reinforce.loss(log_likelihood, y_pred["read_log_prob"], baseline, y_pred["entropy"])
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return super().compute_metrics(x, y, y_pred["logits"], sample_weight)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_keys": self.num_keys,
                "num_values": self.num_values,
                "width": self.width,
                "variant": self.variant,
                "attention_score": self.attention_score,
                "temperature": self.temperature,
                "seed": self.seed,
                "reinforce": self.reinforce.get_config(),
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        return super().from_config(with_attention_score(config))


def lookup_accuracy(model, inputs, answers):
    """Fraction of lookup examples answered right, reading with `training=False`.

    Args:
        model: a `KeyValueLookup`.
        inputs: dict of int arrays `"keys"`, `"values"`, `"query"` (see `lookup_examples`).
        answers: int array `[B]`.

    Returns:
        float in [0, 1].
    """
    logits = model(inputs, training=False)["logits"]  # (B, num_values)
    right = ops.equal(ops.argmax(logits, axis=-1), ops.convert_to_tensor(answers, "int32"))
    return float(ops.mean(ops.cast(right, "float32")))
