"""The benchmarks: a package of studies, each run as `python -m benchmarks.<area>.<study>` from the repository root.

`harness/` holds what every study shares (flags made from the configs' own fields, machine
records, results files, worker processes, peer models); each area (`translation`, `speed`,
`language_models`, `attention_family`, `vision`) holds one folder per study, with its entry point
(`__main__.py`), its steps and its committed results. A study imports only the harness and
`keras_transformer`; the package never imports a benchmark. `benchmarks/README.md` lists them.
"""
