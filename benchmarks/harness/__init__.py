"""What the studies share, one module each.

`flags` (settings whose fields are the configs' own), `machine` (what a result records of the
machine), `results` (a study's start, its results JSON and their ratios), `workers` (a model in a
subprocess), `peers` (the same Transformer built from keras-hub's layers); for the speed studies
`training_workload` (the configs, synthetic batches, models and model FLOPs that train_throughput
and step_breakdown train), `fit_timing` (rounds of `model.fit`: their data and clock) and
`matmul_peak` (the machine's matmul peak, MFU's denominator); `timing` (the step timer of a
`model.fit` and the order of the runs, seed by seed); for the vision studies `cluttered` (the
cluttered-glyph task: its flags and canvases) and `vision_training` (how a vision model is trained
and measured: `fit`, its learning curve, FLOPs, a spatial transformer's placement); and
`stand_in_server`, a STAND-IN for TF Serving's model server (which cannot be installed here) that
the serving tests and the load study talk to over its REST and gRPC APIs.
"""
