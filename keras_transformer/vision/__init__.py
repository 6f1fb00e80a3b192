"""Attention in vision: channel, spatial and mixed attention layers, a task that needs them, models.

The three kinds of visual attention, each a layer of `keras.ops` (any Keras backend), channels-last,
for feature maps of any spatial size:

    channel   SqueezeExcitation, SelectiveKernel, ChannelAttention    which feature maps matter
    spatial   SpatialAttention, SpatialTransformer                    where in the image to look
    mixed     CBAM (channel then spatial), ResidualAttention          both at once
    scale     ScaleAttention                                          which size of the image to read
    glimpse   GlimpseSensor                                           a few pixels, sharp where it looks
    patches   PatchEmbedding, attention_rollout                       self-attention over image patches (ViT)

Every layer but the sensor (whose locations come from its caller) returns its attention on request
(`return_attention_scores=True`): channel weights, a spatial map or an affine transform, never
stored on the layer.

The rest of the package, one module each:

    cluttered   the task that needs attention, generated (no download): a small glyph at a random
                position, size and rotation on a larger cluttered canvas, with its label, box and mask
    pointing    whether a spatial map falls on the object: its mass inside the box, against a
                uniform map's
    models      the small CNN with each kind of attention, and the spatial map it attends with
    st_cnn      the Spatial Transformer paper's ST-CNN (its convolutional localisation net, a glimpse
                smaller than the canvas, a CNN with a dense head), and its identity and CNN controls
    recurrent   the recurrent attention model (Mnih et al. 2014): a glimpse sensor, a recurrent core
                and a location policy trained by REINFORCE; it reads a few glimpses, not the image;
                and the paper's CNN baseline (`build_strided_cnn`)
    dynamic_capacity  Dynamic Capacity Networks (Almahairi et al. 2016): a cheap network everywhere,
                an expensive one on the k positions where the cheap prediction's entropy is most
                sensitive; `dynamic_capacity_flops` counts its FLOPs and its bounds'
    scale_segmentation  attention to scale as its paper trains it (Chen et al. 2016): a class at
                every position, each scale's score map fused by the scale weights, extra
                supervision per scale; the canvas's class read from the map
    saliency    salient-object detection: an encoder-decoder (plain, or with CBAM or residual
                attention in its decoder blocks) from an image to each pixel's object probability
    saliency_metrics  MAE, max F-measure (beta^2 = 0.3) and the pointing game within 15/224 of
                the side, against binary masks
    datasets    tf.data pipelines of the task (a fixed split, or fresh canvases generated chunk by
                chunk, shared by several models: `CanvasChunks`) and of TFDS image datasets
                (TensorFlow only)
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
from keras_transformer.vision.patches import PatchEmbedding, attention_rollout
from keras_transformer.vision.recurrent import GlimpseSensor
from keras_transformer.vision.scale import ScaleAttention
from keras_transformer.vision.spatial import SpatialAttention, SpatialTransformer, affine_grid, bilinear_sample

__all__ = [
    "CBAM",
    "ChannelAttention",
    "GlimpseSensor",
    "PatchEmbedding",
    "ResidualAttention",
    "ScaleAttention",
    "SelectiveKernel",
    "SpatialAttention",
    "SpatialTransformer",
    "SqueezeExcitation",
    "affine_grid",
    "attention_rollout",
    "bilinear_sample",
]
