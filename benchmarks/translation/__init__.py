"""Translation studies: our Transformer translating, against keras-hub's and on what people type.

`multi30k` trains German->English on Multi30k in a wall-clock budget, ours then the same model of
keras-hub's layers on the same batches, and scores both on test_2016_flickr with the same
decodings (beam 4 and greedy); `typed_dates` scores a trained model of the built-in dates on
held-out dates typed 12 ways; `wild_input` times the costliest texts a text export accepts. Each
runs as `python -m benchmarks.translation.<study>` from the repository root.
"""
