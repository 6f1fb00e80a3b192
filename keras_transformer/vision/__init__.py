"""Attention in vision: channel, spatial and mixed attention layers, a task that needs them, models.

The three kinds of visual attention, each a layer of `keras.ops` (any Keras backend), channels-last,
for feature maps of any spatial size:

    channel   SqueezeExcitation, SelectiveKernel, ChannelAttention    which feature maps matter
    spatial   SpatialAttention, SpatialTransformer                    where in the image to look
    mixed     CBAM (channel then spatial), ResidualAttention          both at once
    scale     ScaleAttention                                          which size of the image to read

Every layer returns its attention on request (`return_attention_scores=True`): channel weights,
a spatial map or an affine transform, never stored on the layer.

The rest of the package, one module each:

    cluttered   the task that needs attention, generated (no download): a small glyph at a random
                position, size and rotation on a larger cluttered canvas, with its label and box
    pointing    whether a spatial map falls on the object: its mass inside the box, against a
                uniform map's
    models      the small CNN with each kind of attention, and the spatial map it attends with
    datasets    tf.data pipelines of the task and of TFDS image datasets (TensorFlow only)
    export      SavedModel, image in, class and attention map out (TensorFlow only)

Shape letters of the vision docstrings and shape comments (not the text model's):

    B  batch size
    H  height, W width of a feature map (or image)
    C  channels
    R  reduced width of a bottleneck, C // reduction
    M  branches of a SelectiveKernel
"""

from keras_transformer.vision.channel import ChannelAttention, SelectiveKernel, SqueezeExcitation
from keras_transformer.vision.mixed import CBAM, ResidualAttention
from keras_transformer.vision.scale import ScaleAttention
from keras_transformer.vision.spatial import SpatialAttention, SpatialTransformer, affine_grid, bilinear_sample

__all__ = [
    "CBAM",
    "ChannelAttention",
    "ResidualAttention",
    "ScaleAttention",
    "SelectiveKernel",
    "SpatialAttention",
    "SpatialTransformer",
    "SqueezeExcitation",
    "affine_grid",
    "bilinear_sample",
]
