"""What the studies share, one module each.

`flags` (settings whose fields are the configs' own), `machine` (what a result records of the
machine), `results` (the results JSON and its ratios), `workers` (a model in a subprocess),
`peers` (the same Transformer built from keras-hub's layers).
"""
