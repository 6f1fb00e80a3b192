"""One run of the attention study: build one model, train it, and measure it on the test canvases.

The models (`keras_transformer.vision.models.build_classifier`): one small CNN of 3 blocks of
`--filters` channels, each followed by 2x2 max pooling, then global average pooling and a dense
layer. With `--block residual` (the default) each block is `relu(shortcut(x) + branch(x))`, the
branch a 3x3 convolution and the shortcut the identity, or a 1x1 convolution where the width
changes; with `--block plain` each block is the branch alone, a 3x3 convolution and a relu. The
same CNN is run without attention ("none"), with a SqueezeExcitation on each branch ("se"), a
SelectiveKernel (3x3 and 5x5 branches) instead of each branch's convolution ("sk"), a CBAM on
each branch ("cbam"), a ResidualAttention instead of each branch's convolution ("residual"), or
a SpatialTransformer in front that cuts a `--glimpse` x `--glimpse` glimpse out of the canvas
for the CNN ("stn").

Each run trains with `model.fit` (`benchmarks.harness.vision_training.fit`; the study's docstring
gives the task, the budget and the order of the runs).

Measured per run:
- test accuracy (%) on the `--test-size` test canvases;
- trainable parameters; FLOPs of one forward pass of one canvas, as TensorFlow's profiler counts
  them on the frozen graph (`vision_training.forward_flops`: a multiply-add is 2; the STN's
  gathers are not counted);
- milliseconds per training step: the median over every step but the first (which traces), timed
  by a Keras callback from `on_train_batch_begin` to `on_train_batch_end`;
- whether attention finds the object: each model's spatial map over every test canvas
  (`attention_map`: CBAM's last spatial map; the residual model's last mask, averaged over
  channels; the STN's glimpse footprint; for none, se and sk, which have no spatial attention,
  the mean of their last block's activations, as a reference), scored by its share of mass inside
  the glyph's box (`keras_transformer.vision.pointing`) against a uniform map's share (the box's
  area over the canvas's), their ratio ("lift"), and the pointing game (the map's maximum inside
  the box);
- for the STN, how well its transform undoes the placement (`vision_training.stn_placement`):
  the glimpse's centre against the glyph's centre (pixels; the identity's centre, the canvas's,
  as the reference; and that error split into its mean offset `(row, column)` and the scatter
  around it), the glimpse's side over the glyph's height, and its rotation against the glyph's
  (the correlation, and the mean error against the identity's, which is the mean |angle|);
- for SE and SK, the last block's channel attention on the test canvases (SE's weight per
  channel, SK's weight per branch and channel): its mean per class (in the JSON), its range, and
  how much a weight varies across the class means against across single canvases;
- with `--curve-every N`, a learning curve: every N steps, the accuracy on `--validation-size`
  validation canvases (the task's validation split, never the test split) and the mean training
  loss over those N steps; for choosing a budget or a learning rate without looking at the test
  canvases.
"""

import keras
import numpy as np

from benchmarks.harness import vision_training
from keras_transformer.vision import models as vision_models
from keras_transformer.vision.channel import channel_weights_by_class
from keras_transformer.vision.pointing import pointing_summary


def channel_weight_summary(model, test, num_classes):
    """The last SE or SK layer's weights on the test canvases: per class, their range, their spread.

    `class_spread`: the standard deviation of a channel's (and branch's) weight across the class
    means, averaged over channels; `image_spread`: the same across single canvases. A channel
    that classes switch on and off has a class spread close to its image spread.
    """
    per_image, per_class = channel_weights_by_class(model, test.images, test.labels, num_classes)
    return {
        "per_class": np.round(per_class, 5).tolist(),
        "min": float(per_image.min()),
        "max": float(per_image.max()),
        "class_spread": float(np.nanstd(per_class, axis=0).mean()),
        "image_spread": float(per_image.std(axis=0).mean()),
    }


def train_one(args, attention, seed, data, num_classes):
    """Build, train and measure one model; returns its results and a few test maps for the figure."""
    classifier = vision_training.compiled_classifier(args, attention, seed, num_classes)
    model = classifier.model
    test = data["test"]
    history, callbacks, train_seconds = vision_training.fit(args, model, seed, data)
    timer = callbacks[0]
    outputs = classifier.attention_model.predict(test.images, batch_size=250, verbose=0)
    predictions = outputs["logits"].argmax(-1)
    maps = np.maximum(outputs["attention_map"], 0.0)
    result = {
        "attention": attention,
        "seed": seed,
        "label": vision_models.LABELS[attention],
        "map_kind": vision_models.MAP_KINDS[attention],
        "num_classes": num_classes,
        "test_accuracy_percent": 100.0 * float(np.mean(predictions == test.labels)),
        "parameters": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        "forward_flops": vision_training.forward_flops(model, args.size),
        "ms_per_step_median": float(np.median(timer.milliseconds[1:] or timer.milliseconds)),
        "first_step_ms": float(timer.milliseconds[0]),
        "train_seconds": train_seconds,
        "final_train_loss": float(history.history["loss"][-1]),
        "pointing": pointing_summary(maps, test.boxes),
    }
    if args.curve_every:
        result["curve"] = callbacks[-1].points
    if attention in ("se", "sk"):
        result["channel_weights"] = channel_weight_summary(model, test, num_classes)
    shown = {"maps": maps[:6]}
    if attention == "stn":
        transformer = model.get_layer("spatial_transformer")
        glimpse_model = keras.Model(model.inputs, transformer.output)
        glimpses, theta = glimpse_model.predict(test.images, batch_size=250, verbose=0)
        result["stn"] = vision_training.stn_placement(theta, test)
        shown.update(glimpses=glimpses[:6, ..., 0], theta=theta[:6])
    return result, shown
