"""The exported translator under load: concurrent clients against TF Serving's REST API.

What it runs, for each of `--models` in turn (folders of integer versions, as `export` writes
them; the highest version is served): a server process, the project's STAND-IN for TF Serving's
model server (`benchmarks.harness.stand_in_server`: the real binary cannot be installed here; it
answers TF Serving's REST requests, in Python, from the loaded SavedModel, without request
batching unless `--max-batch-size` asks for it), and `--clients` threads, each a
`keras_transformer.export.clients.RestClient`, sending one request at a time until `--requests`
have been sent in all.

The requests, the same sequence for every model: one sentence each, typed dates of the built-in
test split (every form and length the corpus has; one in 20 is empty or spaces only, a defined
result), and every `--bad-every`-th request a bad one, in turn: an input name the signature does
not have, a signature the model does not have, token ids outside the vocabulary (to
`translate_ids`). A good request must get a translation; a bad one must get the model server's
error, an HTTP 4xx with its message. Anything else (a 5xx, no answer, a time-out, a good request
refused) counts as a failure.

First `--warmup-requests` good requests, untimed (the server's first calls, and with XLA decoding
one compile per batch size, are not in the figures). What it reports, per model: p50, p95 and p99
latency of the good requests (ms, from the client's send to its parsed answer) and their ratio p99 /
p50, requests per second over the run, the counts of good, defined-error and failed requests, and
the server's resident memory (its `VmRSS`, sampled every `--memory-every` seconds): first, last,
peak and the slope of a straight line fitted to it against requests done, in MiB per 1,000 requests
(flat: near 0). With several models, each one's p50 and throughput against the first's.
`--max-batch-size 0,8` serves each model twice, without and with the stand-in's request batching
(concurrent requests to one signature run as one call of up to 8 rows, as TF Serving's
`--enable_batching` would). JSON in `--out`.

    python train.py && keras-transformer export --run-dir runs/builtin --export-dir saved_models/xla --xla-decoding true
    python -m benchmarks.serving.load --models saved_models/transformer saved_models/xla/transformer
    python -m benchmarks.serving.load --models saved_models/xla/transformer --max-batch-size 0,8
    python -m benchmarks.serving.load --models saved_models/transformer --requests 200   # a quick check
"""
