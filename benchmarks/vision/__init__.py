"""Vision studies: attention in small image models, on generated cluttered glyphs.

`attention` sets a small CNN against the same CNN with each kind of attention (SE, SK, CBAM,
residual attention, a spatial transformer in front); `stn` reproduces the Spatial Transformer
paper's ST-CNN; `ram` the recurrent attention model; `dcn` Dynamic Capacity Networks; `scale`
attention to scale; `saliency` salient-object detection with attention in a decoder. They share
the cluttered-glyph task (`benchmarks.harness.cluttered`) and the way a model is trained and
measured (`benchmarks.harness.vision_training`). Each runs as `python -m benchmarks.vision.<study>`
from the repository root; its JSON and figures go to its own `results/` folder.
"""
