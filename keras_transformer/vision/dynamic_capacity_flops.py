"""FLOPs of a Dynamic Capacity Network and of its two bounds, counted from the layers' shapes.

`flop_counts(model, height, width, k)` counts one forward pass of one image through the coarse
network alone, the fine network on every block, and the DCN (the coarse network, the saliency,
the fine network on k blocks, the top network twice), with TensorFlow's profiler's conventions
(a multiply-add is 2 FLOPs, a bias addition 1, a pooling window 1 per input, batch normalisation
2 per output), so that the counts
can be checked against it. The model is `keras_transformer.vision.dynamic_capacity`'s.
"""

import math

import keras

from keras_transformer.checks import check_int
from keras_transformer.vision.dynamic_capacity import grid_size
from keras_transformer.vision.normalized import Normalized


def _layer_flops(layer, shape):
    """FLOPs of one layer on one input of `shape` `(height, width, channels)`, and its output shape.

    A multiply-add is 2 FLOPs; a bias addition 1 per output; a pooling window 1 per input it reads
    (TensorFlow's profiler's conventions, so that the two counts can be compared); batch
    normalisation in inference 2 per output (the profiler also counts the few operations per
    channel that fold its statistics into a scale and a shift, which a deployed model computes once).

    Returns:
        `(multiply_adds, flops, output_shape)`.
    """
    if isinstance(layer, Normalized):  # the convolution, then batch normalisation: a scale and a shift per output
        multiply_adds, flops, out = _layer_flops(layer.layer, shape)
        return multiply_adds, flops + 2 * math.prod(out), out
    out = tuple(int(d) for d in layer.compute_output_shape((1, *shape))[1:])
    outputs = math.prod(out)
    if isinstance(layer, keras.layers.Conv2D):
        kh, kw = layer.kernel_size
        multiply_adds = outputs * kh * kw * shape[-1]
        return multiply_adds, 2 * multiply_adds + (outputs if layer.use_bias else 0), out
    if isinstance(layer, (keras.layers.AveragePooling2D, keras.layers.MaxPooling2D)):
        return 0, outputs * math.prod(layer.pool_size), out
    raise ValueError(f"No FLOP count for layer {layer.name!r} of type {type(layer).__name__}")


def _network_flops(layers, shape):
    """`(multiply_adds, flops, output_shape)` of `layers` applied in order to one input of `shape`."""
    multiply_adds = flops = 0
    for layer in layers:
        layer_multiply_adds, layer_flops, shape = _layer_flops(layer, shape)
        multiply_adds, flops = multiply_adds + layer_multiply_adds, flops + layer_flops
    return multiply_adds, flops, shape


def flop_counts(model, height, width, k=None):
    """The forward FLOPs per image of the coarse-only, fine-everywhere and DCN models of `model`'s sizes.

    Counted from the layers' shapes, for one `height x width` image, with TensorFlow's profiler's
    conventions: a multiply-add of a convolution or a dense layer is 2 FLOPs, a bias addition 1 per
    output, a pooling window 1 per input it reads, the global pool 1 per value pooled (the profiler
    counts an average so, a maximum not at all), batch normalisation 2 per output.
    Activations, padding, reshapes and the top-k are free. The three models:

        coarse   f_c on the image + g
        fine     f_f on all h w patches + g
        dcn      f_c + g (the coarse prediction) + the saliency (dH/dz W^T and the transposed top
                 convolution, multiply-adds only) + f_f on k patches + the scatter (one multiply-add
                 per position, selected patch and feature: an einsum) + g (the mixed prediction)

    Args:
        model: a built `DynamicCapacityNetwork` of any mode (its sizes are read, not its mode).
        height: int, the images' height H.
        width: int, the images' width W.
        k: None (the model's `k`) or int, the fine patches of the DCN.

    Returns:
        dict: `"coarse"`, `"fine"`, `"dcn"` (FLOPs), `"multiply_adds"` (the same three keys), and
        `"parts"` (FLOPs of `"coarse_net"`, `"fine_patch"` (one patch), `"top"`, `"saliency"`,
        `"scatter"`) and `"grid"` `(h, w)`.
    """
    check_int("height", height, 1)
    check_int("width", width, 1)
    k = model.k if k is None else check_int("k", k, 1)
    p, c, d = model.patch_size, model.channels, model.features
    h, w = grid_size(height, width, p)
    if k > h * w:
        raise ValueError(f"`k` must be at most the grid's {h} x {w} = {h * w} positions. Received: k={k!r}")
    coarse_layers = getattr(model, "coarse_net", None)
    coarse_layers = coarse_layers.layers if coarse_layers is not None else model._coarse_layers()
    fine_layers = getattr(model, "fine_net", None)
    fine_layers = fine_layers.layers if fine_layers is not None else model._fine_layers()
    coarse_mac, coarse_flops, _ = _network_flops(coarse_layers, (h * p, w * p, c))
    patch_mac, patch_flops, _ = _network_flops(fine_layers, (p, p, c))
    conv_mac, conv_flops, top_shape = _layer_flops(model.top_conv, (h, w, d))
    dense_mac = model.top_units * model.num_classes
    top_mac = conv_mac + dense_mac
    top_flops = conv_flops + math.prod(top_shape) + 2 * dense_mac + model.num_classes  # conv, mean, dense
    saliency_mac = dense_mac + conv_mac
    scatter_mac = k * h * w * d
    counts = {
        "coarse": coarse_flops + top_flops,
        "fine": h * w * patch_flops + top_flops,
        "dcn": coarse_flops + 2 * top_flops + 2 * saliency_mac + k * patch_flops + 2 * scatter_mac,
    }
    counts["multiply_adds"] = {
        "coarse": coarse_mac + top_mac,
        "fine": h * w * patch_mac + top_mac,
        "dcn": coarse_mac + 2 * top_mac + saliency_mac + k * patch_mac + scatter_mac,
    }
    counts["parts"] = {
        "coarse_net": coarse_flops,
        "fine_patch": patch_flops,
        "top": top_flops,
        "saliency": 2 * saliency_mac,
        "scatter": 2 * scatter_mac,
    }
    counts["grid"] = (h, w)
    return counts
