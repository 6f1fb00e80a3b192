"""Self-attention over image patches (the Vision Transformer, Dosovitskiy et al. 2021): patches in, rollout out.

`PatchEmbedding` turns an image into the sequence a Transformer encoder reads: the image cut into
non-overlapping `P x P` patches, each flattened and projected to `D` (the paper's equation 1,
`x_p E`), a learned class token prepended, learned position embeddings added. The encoder blocks
of `keras_transformer.layers` then read it as they read a sentence.

`attention_rollout` (Abnar and Zuidema 2020) says which patches the class token draws on across
all layers: each layer's attention, averaged over the heads, with the residual connection added
as the identity (`0.5 A + 0.5 I`, rows renormalised), multiplied from the first layer to the last.

Shape letters: B batch, H x W image, C channels, P patch side, N = (H / P)(W / P) patches, D width.
"""

import keras
from keras import ops

from keras_transformer.checks import check_bool, check_int


@keras.saving.register_keras_serializable(package="keras_transformer")
class PatchEmbedding(keras.layers.Layer):
    """Image to a sequence of patch vectors, with a class token and learned positions.

    `z_0 = [x_class; x_p^1 E; ...; x_p^N E] + E_pos` (the paper's equation 1): patch `i` is the
    `i`-th `P x P` square in row-major order, flattened row by row (channels last) into `P * P * C`
    values; `E` is a `Dense(D)` with bias.

    Args:
        patch_size: int P; the image's height and width must be multiples of it.
        d_model: int D, the width of every vector.
        class_token: bool, prepend a learned class token (the sequence is then N + 1 long).

    Call arguments:
        images: float tensor `[B, H, W, C]`.

    Returns:
        float tensor `[B, N (+ 1), D]`.

    Raises:
        ValueError: at build, an image side that is not a multiple of `patch_size`.
    """

    def __init__(self, patch_size, d_model, class_token=True, **kwargs):
        super().__init__(**kwargs)
        check_int("patch_size", patch_size, 1)
        check_int("d_model", d_model, 1)
        check_bool("class_token", class_token)
        self.patch_size = patch_size
        self.d_model = d_model
        self.class_token = class_token

    def build(self, input_shape):
        _, height, width, channels = input_shape
        for name, side in (("height", height), ("width", width)):
            if side is None or side % self.patch_size:
                raise ValueError(
                    f"The image {name} must be a multiple of patch_size. Received: {name}={side}, "
                    f"patch_size={self.patch_size}"
                )
        self.num_patches = (height // self.patch_size) * (width // self.patch_size)
        self.projection = keras.layers.Dense(self.d_model, dtype=self.dtype_policy, name="projection")
        self.projection.build((None, None, self.patch_size * self.patch_size * channels))
        length = self.num_patches + int(self.class_token)
        if self.class_token:
            self.class_embedding = self.add_weight(
                name="class_embedding", shape=(1, 1, self.d_model), initializer="zeros"
            )
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(1, length, self.d_model),
            initializer=keras.initializers.RandomNormal(stddev=0.02),
        )

    def call(self, images):
        batch = ops.shape(images)[0]
        _, height, width, channels = images.shape
        p = self.patch_size
        rows, columns = height // p, width // p
        patches = ops.reshape(images, (batch, rows, p, columns, p, channels))
        patches = ops.transpose(patches, (0, 1, 3, 2, 4, 5))  # (B, rows, columns, P, P, C)
        patches = ops.reshape(patches, (batch, rows * columns, p * p * channels))  # (B, N, P*P*C)
        tokens = self.projection(patches)  # (B, N, D)
        if self.class_token:
            cls = ops.broadcast_to(ops.cast(self.class_embedding, tokens.dtype), (batch, 1, self.d_model))
            tokens = ops.concatenate([cls, tokens], axis=1)  # (B, N + 1, D)
        return tokens + ops.cast(self.position_embeddings, tokens.dtype)

    def compute_output_shape(self, input_shape):
        _, height, width, _ = input_shape
        patches = (height // self.patch_size) * (width // self.patch_size)
        return (input_shape[0], patches + int(self.class_token), self.d_model)

    def get_config(self):
        config = super().get_config()
        config.update({"patch_size": self.patch_size, "d_model": self.d_model, "class_token": self.class_token})
        return config


def attention_rollout(weights):
    """How much each position draws on each input position through all layers (Abnar and Zuidema 2020).

    Args:
        weights: a list over layers, first to last, of attention weights `[B, heads, T, T]`.

    Returns:
        float tensor `[B, T, T]`: row `i` is position `i`'s share of every input position
        (rows sum to 1). With a class token at position 0, row 0 without its first entry, reshaped
        to the patch grid, is the rollout map over the image.
    """
    rollout = None
    for layer in weights:
        mixed = ops.mean(ops.cast(layer, "float32"), axis=1)  # (B, T, T): the heads averaged
        identity = ops.eye(ops.shape(mixed)[-1], dtype="float32")[None]
        mixed = 0.5 * mixed + 0.5 * identity  # the residual connection
        mixed = mixed / ops.sum(mixed, axis=-1, keepdims=True)
        rollout = mixed if rollout is None else ops.matmul(mixed, rollout)
    return rollout


@keras.saving.register_keras_serializable(package="keras_transformer")
class RolloutMap(keras.layers.Layer):
    """The class token's attention rollout over the patch grid: `[B, rows, columns]`.

    Args:
        rows: int, patches per column of the image (H / P).
        columns: int, patches per row (W / P).

    Call arguments:
        weights: list over layers of attention weights `[B, heads, 1 + N, 1 + N]`, the class token
            at position 0.

    Returns:
        float32 `[B, rows, columns]`: row 0 of `attention_rollout`, without the class token's own
        share, on the patch grid.
    """

    def __init__(self, rows, columns, **kwargs):
        super().__init__(**kwargs)
        check_int("rows", rows, 1)
        check_int("columns", columns, 1)
        self.rows, self.columns = rows, columns

    def call(self, weights):
        shares = attention_rollout(weights)[:, 0, 1:]  # (B, N): the class token's share of each patch
        return ops.reshape(shares, (-1, self.rows, self.columns))

    def compute_output_shape(self, input_shape):
        return (input_shape[0][0], self.rows, self.columns)

    def get_config(self):
        config = super().get_config()
        config.update({"rows": self.rows, "columns": self.columns})
        return config
