"""The recurrent attention model: a classifier that reads a few small glimpses and learns where to put them.

Mnih, Heess, Graves and Kavukcuoglu 2014, "Recurrent Models of Visual Attention"
(https://arxiv.org/abs/1406.6247). Instead of convolving the whole image, the model looks at it T
times through a small retina, each time choosing where to look next:

    l_0 = (0, 0), the image's centre
    for t = 1 .. T:
        rho_t = sensor(x, l_{t-1})                  (B, k, g, g, C)  k patches of growing scale
        g_t   = relu(W_a relu(W_g rho_t) + W_b relu(W_l l_{t-1}))   the glimpse network: what and where
        h_t   = core(g_t, h_{t-1})                  a recurrent cell (GRU, LSTM, or the paper's relu RNN)
        l_t  ~ N(tanh(W_m h_t), sigma^2 I)          the location policy (t < T)
    logits = W_c h_T                                the classification at the last step

The glimpse sensor (`GlimpseSensor`, section 3.1's retina) cuts k square patches centred on the
location, the first `g x g` pixels, each next one twice as wide, and shrinks each to `g x g` by
averaging blocks of pixels: sharp at the centre, coarse around it, `k g^2` values in all.

Sampling a location is not differentiable, so the location policy learns by REINFORCE
(`keras_transformer.layers.reinforce.Reinforce`, the estimator of the hard attention layer too):
the reward is 1 when the final classification is right, 0 otherwise, and every location
decision's log-probability is weighed by the reward minus a baseline. The paper's baseline,
`b_t = W_v h_t` regressed on the reward, is the default (`Reinforce("value")`). The rest of the
network learns by the cross-entropy of the classification: the paper's hybrid loss.

The location head reads `h_t` as it is by default (`policy_trains_core=True`), so REINFORCE
trains the recurrent core and the glimpse network as well as the location head, as in the paper;
with `policy_trains_core=False` it reads `h_t` through a stop-gradient, and REINFORCE trains the
location head alone (the core then learns from the cross-entropy only).

Deviations from the paper, each a common choice of reimplementations:
- the baseline reads `h_t` through a stop-gradient, so its regression on the reward trains the
  baseline alone, never the core;
- the first glimpse is at the centre, not at a random location;
- a sampled location is clipped to the image ([-1, 1]) before the sensor reads it (its
  log-probability is that of the unclipped sample);
- at inference (`training=False`) the model looks at the policy's mean, not at a sample.

Locations are `(row, column)` in normalized coordinates: -1 is the centre of the first pixel, +1
of the last, as `keras_transformer.vision.affine_grid` reads them.

`build_strided_cnn` is the convolutional network the paper compares RAM with.
"""

import math

import keras
from keras import ops

from keras_transformer.checks import check_choice, check_int, check_number
from keras_transformer.layers.reinforce import Reinforce
from keras_transformer.vision.spatial import bilinear_sample

CORES = ("gru", "lstm", "rnn")
REWARDS = ("correct", "log_likelihood")
# The estimator unless one is given: the paper's learned baseline b_t = W_v h_t.
DEFAULT_REINFORCE = Reinforce("value")


def gaussian_log_density(sample, mean, std):
    """The location policy's log-probability: the log-density of N(mean, std^2 I) at 2-D `sample`.

    Args:
        sample: float `[..., 2]`, the sampled locations (a constant: pass them stop-gradient'ed).
        mean: float `[..., 2]`, the policy's mean.
        std: float sigma > 0, the same for both coordinates.

    Returns:
        float `[...]`: `-|sample - mean|^2 / (2 sigma^2) - 2 log sigma - log(2 pi)`.
    """
    squared = ops.sum(ops.square(ops.cast(sample, "float32") - ops.cast(mean, "float32")), axis=-1)
    return -squared / (2.0 * std**2) - 2.0 * math.log(std) - math.log(2.0 * math.pi)


@keras.saving.register_keras_serializable(package="keras_transformer")
class GlimpseSensor(keras.layers.Layer):
    """The retina of the recurrent attention model: k patches of growing scale around a location.

    Patch i (i = 0 .. k-1) covers `g 2^i x g 2^i` pixels centred on the location and is shrunk to
    `g x g` by averaging each `2^i x 2^i` block. The image is read at pixel pitch around the
    location (bilinearly, since the location is real-valued), zero outside the image.

    Args:
        patch_size: int g >= 1, the side of every patch after shrinking.
        scales: int k >= 1, the number of patches.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        images: float `[B, H, W, C]`.
        locations: float `[B, 2]`, the centre `(row, column)` in normalized coordinates.

    Returns:
        float `[B, k, g, g, C]`, patch 0 the sharpest.

    Raises:
        ValueError: `patch_size` or `scales` not a positive int; the message names the value.
    """

    def __init__(self, patch_size=12, scales=3, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = check_int("patch_size", patch_size, 1)
        self.scales = check_int("scales", scales, 1)

    def call(self, images, locations):
        shape = ops.shape(images)
        rows, columns = ops.cast(shape[1], "float32"), ops.cast(shape[2], "float32")
        locations = ops.cast(locations, "float32")
        g = self.patch_size
        patches = []
        for i in range(self.scales):
            factor = 2**i
            side = g * factor
            offsets = ops.cast(ops.arange(side), "float32") - (side - 1) / 2.0  # (side,), in pixels
            # Normalized coordinates move by 2 / (size - 1) per pixel.
            y = locations[:, 0, None, None] + 2.0 * offsets[None, :, None] / ops.maximum(rows - 1.0, 1.0)
            x = locations[:, 1, None, None] + 2.0 * offsets[None, None, :] / ops.maximum(columns - 1.0, 1.0)
            y, x = ops.broadcast_to(y, (shape[0], side, side)), ops.broadcast_to(x, (shape[0], side, side))
            patch = bilinear_sample(images, x, y)  # (B, side, side, C)
            if factor > 1:
                patch = ops.reshape(patch, (shape[0], g, factor, g, factor, shape[3]))
                patch = ops.mean(patch, axis=(2, 4))  # (B, g, g, C)
            patches.append(patch)
        return ops.stack(patches, axis=1)  # (B, k, g, g, C)

    def compute_output_shape(self, images_shape, locations_shape=None):
        return (images_shape[0], self.scales, self.patch_size, self.patch_size, images_shape[-1])

    def get_config(self):
        config = super().get_config()
        config.update({"patch_size": self.patch_size, "scales": self.scales})
        return config


@keras.saving.register_keras_serializable(package="keras_transformer")
class RecurrentAttentionModel(keras.Model):
    """Classify an image from T glimpses, choosing each glimpse's location from the ones before.

    The module docstring gives the equations. Trained with `model.fit` (compile it with an
    optimizer and, optionally, `metrics=["accuracy"]`; no loss: `compute_loss` is the hybrid
    loss): the cross-entropy of the last step's classification plus the REINFORCE surrogate of
    `reinforce` for the location policy, with the reward 1 for a right classification and 0 for a
    wrong one. In training the model runs `reinforce.samples` episodes per image (each samples
    its own locations); the cross-entropy averages over them.

    Args:
        num_classes: int, the classes of the logits.
        glimpses: int T >= 1, the glimpses per image (T - 1 location decisions; the first glimpse
            is at the centre).
        patch_size: int g, the sensor's patch side.
        scales: int k, the sensor's patches per glimpse.
        glimpse_units: int, the width of the "what" and "where" layers (the paper's 128).
        units: int, the width of the glimpse feature g_t and of the core (the paper's 256).
        core: one of `CORES`: `"gru"`, `"lstm"` or `"rnn"` (the paper's `relu(W h + U g)`).
        location_std: float sigma > 0, the standard deviation of the location policy, in
            normalized coordinates (the canvas is 2 wide).
        reward: one of `REWARDS`: `"correct"` (the paper's: 1 for a right classification, 0
            otherwise) or `"log_likelihood"` (the log-probability of the right class).
        policy_trains_core: bool; True (default, the paper's) lets REINFORCE's gradient reach the
            core and the glimpse network through the location head; False puts a stop-gradient
            between the core and the location head, which REINFORCE then trains alone.
        reinforce: a `Reinforce`, its `get_config()` dict, or None for `DEFAULT_REINFORCE`
            (the paper's learned baseline `b_t = W_v h_t`); `"learned"` is one scalar for every
            step.
        seed: int or None, the seed of the location noise.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        images: float `[B, H, W, C]`, any H and W.
        training: bool; the locations are sampled only when True, the policy's mean otherwise.

    Returns:
        dict: `"logits"` `[B, num_classes]` (of the first episode in training); `"locations"`
        `[B, T, 2]`, where each glimpse looked (the first episode's, clipped to the image);
        `"episode_logits"` `[S, B, num_classes]`; `"log_probs"` `[T - 1, S, B]`, the
        log-density of each sampled location (zeros at inference); `"baselines"` `[T - 1, S,
        B]`, `b_t` (the `"value"` baseline; zeros otherwise). S is `reinforce.samples` in
        training, 1 otherwise.

    Raises:
        ValueError: a bad argument; the message names it and its value.
    """

    def __init__(
        self, num_classes=10, glimpses=4, patch_size=12, scales=3, glimpse_units=128, units=256, core="gru",
        location_std=0.1, reward="correct", policy_trains_core=True, reinforce=None, seed=None, **kwargs,
    ):  # fmt: skip
        super().__init__(**kwargs)
        check_choice("reward", reward, REWARDS)
        check_choice("core", core, CORES)
        check_number("location_std", location_std, greater_than=0)
        reinforce = DEFAULT_REINFORCE if reinforce is None else reinforce
        self.reinforce = Reinforce(**reinforce) if isinstance(reinforce, dict) else reinforce
        if not isinstance(self.reinforce, Reinforce):
            raise ValueError(f"`reinforce` must be a Reinforce, its config or None. Received: {reinforce!r}")
        self.num_classes = check_int("num_classes", num_classes, 1)
        self.glimpses = check_int("glimpses", glimpses, 1)
        self.glimpse_units = check_int("glimpse_units", glimpse_units, 1)
        self.units = check_int("units", units, 1)
        self.core, self.location_std, self.reward, self.seed = core, float(location_std), reward, seed
        self.policy_trains_core = bool(policy_trains_core)
        self.sensor = GlimpseSensor(patch_size, scales, name="glimpse_sensor")
        self.what = keras.layers.Dense(glimpse_units, activation="relu", name="what")  # relu(W_g rho)
        self.where = keras.layers.Dense(glimpse_units, activation="relu", name="where")  # relu(W_l l)
        self.what_out = keras.layers.Dense(units, name="what_out")  # W_a
        self.where_out = keras.layers.Dense(units, use_bias=False, name="where_out")  # W_b
        self.cell = {
            "gru": lambda: keras.layers.GRUCell(units, name="core"),
            "lstm": lambda: keras.layers.LSTMCell(units, name="core"),
            "rnn": lambda: keras.layers.SimpleRNNCell(units, activation="relu", name="core"),
        }[core]()
        self.locator = keras.layers.Dense(2, activation="tanh", name="locator")  # mean of l_t
        self.classifier = keras.layers.Dense(num_classes, name="classifier")
        self.value_head = self.baseline = None
        if self.reinforce.baseline == "value":
            self.value_head = keras.layers.Dense(1, name="value_head")  # b_t = W_v h_t
        elif self.reinforce.baseline == "learned":
            self.baseline = self.add_weight(shape=(), initializer="zeros", name="baseline")
        self.noise = keras.random.SeedGenerator(seed)

    @property
    def patch_size(self):
        return self.sensor.patch_size

    @property
    def scales(self):
        return self.sensor.scales

    @property
    def values_read(self):
        """The values the model reads of each image: `T k g^2` per channel (the sensor's outputs)."""
        return self.glimpses * self.scales * self.patch_size**2

    def build(self, images_shape):
        """Create every weight for images of `images_shape` `[B, H, W, C]` (C must be known)."""
        self.call(ops.zeros((1, 2 * self.patch_size, 2 * self.patch_size, images_shape[-1])))

    def call(self, images, training=False):
        episodes = self.reinforce.samples if training else 1
        images = ops.tile(images, (episodes, 1, 1, 1))  # (S * B, H, W, C), episode-major
        rows = ops.shape(images)[0]
        location = ops.zeros((rows, 2), "float32")  # l_0: the centre
        state = [ops.zeros((rows, self.units), "float32")] * (2 if self.core == "lstm" else 1)
        locations, log_probs, baselines = [location], [], []
        for t in range(self.glimpses):
            patches = self.sensor(images, location)  # (S * B, k, g, g, C)
            what = self.what(ops.reshape(patches, (-1, self.scales * self.patch_size**2 * images.shape[-1])))
            glimpse = ops.relu(self.what_out(what) + self.where_out(self.where(location)))  # g_t
            hidden, state = self.cell(glimpse, state, training=training)
            state = list(state) if isinstance(state, (list, tuple)) else [state]
            if t == self.glimpses - 1:
                break
            mean = self.locator(hidden if self.policy_trains_core else ops.stop_gradient(hidden))  # (S * B, 2)
            if training:
                sample = ops.stop_gradient(
                    mean + self.location_std * keras.random.normal(ops.shape(mean), seed=self.noise)
                )
                log_probs.append(gaussian_log_density(sample, mean, self.location_std))
                location = ops.clip(sample, -1.0, 1.0)
            else:
                log_probs.append(ops.zeros((rows,), "float32"))
                location = mean
            if self.value_head is not None:
                baselines.append(self.value_head(ops.stop_gradient(hidden))[:, 0])
            else:
                baselines.append(ops.zeros((rows,), "float32"))
            locations.append(location)
        logits = ops.reshape(self.classifier(hidden), (episodes, -1, self.num_classes))  # (S, B, K)
        batch = ops.shape(logits)[1]

        def by_episode(values):  # T - 1 tensors (S * B,) -> (T - 1, S, B)
            if not values:
                return ops.zeros((0, episodes, batch), "float32")
            return ops.reshape(ops.stack(values), (len(values), episodes, batch))

        return {
            "logits": logits[0],
            "locations": ops.stack(locations, axis=1)[:batch],  # (B, T, 2)
            "episode_logits": logits,
            "log_probs": by_episode(log_probs),
            "baselines": by_episode(baselines),
        }

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The hybrid loss: cross-entropy of every episode's classification plus the policy's REINFORCE surrogate."""
        logits = y_pred["episode_logits"]  # (S, B, K)
        labels = ops.broadcast_to(ops.cast(ops.convert_to_tensor(y), "int32")[None], ops.shape(logits)[:2])
        cross_entropy = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)  # (S, B)
        loss = ops.mean(cross_entropy)
        decisions = self.glimpses - 1
        if training and decisions:
            if self.reward == "correct":
                reward = ops.cast(ops.argmax(logits, axis=-1) == labels, "float32")  # (S, B)
            else:
                reward = -cross_entropy  # log p(y | x, l_1 .. l_T), (S, B)
            policy = 0.0
            for t in range(decisions):
                baseline = y_pred["baselines"][t] if self.value_head is not None else self.baseline
                policy = policy + self.reinforce.loss(reward, y_pred["log_probs"][t], baseline)
            loss = loss + policy / decisions
        if self.losses:
            loss = loss + ops.sum(self.losses)
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return super().compute_metrics(x, y, y_pred["logits"], sample_weight)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_classes": self.num_classes,
                "glimpses": self.glimpses,
                "patch_size": self.patch_size,
                "scales": self.scales,
                "glimpse_units": self.glimpse_units,
                "units": self.units,
                "core": self.core,
                "location_std": self.location_std,
                "reward": self.reward,
                "policy_trains_core": self.policy_trains_core,
                "reinforce": self.reinforce.get_config(),
                "seed": self.seed,
            }
        )
        return config


def build_strided_cnn(image_size, num_classes=10, channels=1, filters=8, kernel_size=10, strides=5, units=256):
    """The recurrent attention paper's convolutional baseline: one strided convolution, one hidden layer.

    Mnih et al. 2014 ("Recurrent Models of Visual Attention") put their model beside a
    "convolutional, 2 layers" network on cluttered translated MNIST: 8 filters of 10x10 with
    stride 5, relu, a fully connected layer of 256 relu units, then the classes:

        images [B, H, W, C]
        conv (no padding) + relu   [B, (H - k) // s + 1, (W - k) // s + 1, filters]
        flatten, dense + relu      [B, units]
        dense                      logits [B, classes]

    Args:
        image_size: `(height, width)` of the images (the dense layer reads every position).
        num_classes: int, the classes of the logits.
        channels: int, the images' channels C.
        filters: int >= 1, the convolution's channels.
        kernel_size: int >= 1, the convolution's side k (at most the image's sides).
        strides: int >= 1, the convolution's stride s.
        units: int >= 1, the hidden layer's units.

    Returns:
        `keras.Model`, images `[B, height, width, C]` -> logits `[B, classes]`.

    Raises:
        ValueError: a size below 1, or a kernel larger than the image.
    """
    height, width = (check_int("image_size", side, 1) for side in image_size)
    for name, value in (("filters", filters), ("strides", strides), ("units", units)):
        check_int(name, value, 1)
    check_int("kernel_size", kernel_size, 1, min(height, width))
    images = keras.Input((height, width, channels), name="images")
    x = keras.layers.Conv2D(filters, kernel_size, strides=strides, activation="relu", name="conv")(images)
    x = keras.layers.Dense(units, activation="relu", name="hidden")(keras.layers.Flatten(name="flatten")(x))
    return keras.Model(images, keras.layers.Dense(num_classes, name="logits")(x), name="strided_cnn")
