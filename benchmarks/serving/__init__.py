"""Serving: the exported translator under concurrent requests, served over TF Serving's REST API.

`load` drives one or more exports, in turn, with concurrent clients through the project's stand-in
for TF Serving's model server (`benchmarks.harness.stand_in_server`): latency percentiles,
throughput, errors and the server's resident memory over the run.
"""
