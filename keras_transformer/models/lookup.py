"""A one-layer attention reader of the key-value lookup task, soft or hard.

The model embeds the keys, the values and the query of `keras_transformer.data.lookup`, reads
the values with one `keras_transformer.layers.Attention` (key-value mode: the query addresses
the keys, the values are read) and classifies the context into a value symbol. Everything it
must learn to answer is in the score function: which key embedding a query embedding matches.
So its four trainings differ only in how the score function gets its gradient (`VARIANTS`):

    soft       the weighted average, differentiated exactly
    reinforce  hard attention sampled in training, score-function gradient with a learned baseline
    gumbel     hard attention sampled in training, straight-through Gumbel-softmax gradient
    argmax     hard attention, argmax also in training: the score function gets no gradient at all
               (a control: it stays at its initialisation)

Hard attention reads the argmax at inference (`training=False`) whatever the variant.
"""

import keras
from keras import ops

from keras_transformer.layers.hard_attention import reinforce_loss
from keras_transformer.layers.single_head import Attention

VARIANTS = ("soft", "reinforce", "gumbel", "argmax")


@keras.saving.register_keras_serializable(package="keras_transformer")
class KeyValueLookup(keras.Model):
    """Answer a lookup query with one soft or hard attention read.

    With `variant="reinforce"` the training loss (`compute_loss`) adds to the cross-entropy
    `-log p(answer | v_z)` of the value read:

        reinforce_loss(R, log alpha_z, b) + (R - b)^2,   R = log p(answer | v_z)

    the REINFORCE estimate for the score function, with the reward R the log-likelihood of the
    answer given the sampled read (Xu et al. 2015's lower bound), and a learned scalar baseline
    b trained to predict R. The other variants train on the cross-entropy alone.

    Args:
        num_keys: int, size of the key alphabet (keys and queries).
        num_values: int, size of the value alphabet: the classes.
        width: int D, the embeddings' width.
        variant: one of `VARIANTS`.
        score: the attention's score function (see `keras_transformer.layers.Attention`).
        temperature: the Gumbel-softmax temperature (`variant="gumbel"`).
        seed: int or None, the sampling noise's seed.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: dict of int tensors `"keys"` `[B, P]`, `"values"` `[B, P]`, `"query"` `[B]`.
        training: bool; hard attention samples only when True (`"reinforce"`, `"gumbel"`).

    Returns:
        dict: `"logits"` float `[B, num_values]` and `"log_prob"` float `[B]`, log alpha_z of
        the chosen pair (zeros for `"soft"`).

    Raises:
        ValueError: an unknown `variant` (or a bad attention argument).
    """

    def __init__(
        self, num_keys=32, num_values=16, width=32, variant="soft", score="dot", temperature=1.0, seed=None, **kwargs
    ):
        super().__init__(**kwargs)
        if variant not in VARIANTS:
            raise ValueError(f"`variant` must be one of {VARIANTS}. Received: variant={variant!r}")
        self.num_keys, self.num_values, self.width = num_keys, num_values, width
        self.variant, self.score, self.temperature, self.seed = variant, score, temperature, seed
        self.key_embedding = keras.layers.Embedding(num_keys, width, name="key_embedding")
        self.query_embedding = keras.layers.Embedding(num_keys, width, name="query_embedding")
        self.value_embedding = keras.layers.Embedding(num_values, width, name="value_embedding")
        hard = {"soft": None, "argmax": "argmax"}.get(variant, "sample")
        estimator = "gumbel" if variant == "gumbel" else "reinforce"
        self.attention = Attention(
            score=score, hard=hard, estimator=estimator, temperature=temperature, seed=seed, name="attention"
        )
        self.output_dense = keras.layers.Dense(num_values, name="output_dense")
        if variant == "argmax":  # no gradient reaches the score function's weights: frozen
            self.key_embedding.trainable = self.query_embedding.trainable = False
        if variant == "reinforce":
            self.baseline = self.add_weight(shape=(), initializer="zeros", name="baseline")  # b

    def call(self, inputs, training=False):
        keys = self.key_embedding(inputs["keys"])  # (B, P, D)
        values = self.value_embedding(inputs["values"])  # (B, P, D)
        query = self.query_embedding(inputs["query"])[:, None, :]  # (B, 1, D)
        every_pair = ops.ones(ops.shape(inputs["keys"]), "bool")  # (B, P): no padding
        context, log_prob = self.attention(
            query,
            keys,
            values,
            queries_mask=every_pair[:, :1],
            keys_mask=every_pair,
            return_log_prob=True,
            training=training,
        )  # (B, 1, D), (B, 1)
        return {"logits": self.output_dense(context[:, 0]), "log_prob": log_prob[:, 0]}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        log_likelihood = -keras.losses.sparse_categorical_crossentropy(y, y_pred["logits"], from_logits=True)  # (B,)
        loss = -ops.mean(log_likelihood)
        if self.variant == "reinforce" and training:
            reward = ops.stop_gradient(log_likelihood)  # R
            loss = loss + reinforce_loss(reward, y_pred["log_prob"], self.baseline)
            loss = loss + ops.mean(ops.square(reward - self.baseline))
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
                "score": self.score,
                "temperature": self.temperature,
                "seed": self.seed,
            }
        )
        return config


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
