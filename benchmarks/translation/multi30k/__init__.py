r"""Multi30k German->English in a fixed training-time budget: our Transformer against keras-hub's.

    python -m benchmarks.translation.multi30k --data path/to/multi30k --minutes 30
    python -m benchmarks.translation.multi30k --data path/to/multi30k --minutes 0.5 --preset tiny \
        --source-vocab-size 2000 --train-size 3000 --test-size 100 --curve-points 2 \
        --curve-sentences 50                                                # a quick check

`--data` is a folder with Multi30k's `{train,val,test_2016_flickr}.{de,en}.gz`, read only.
`python -m benchmarks.translation.multi30k --help` lists the flags (`settings`). One run, three
steps:

1. The parent process learns, from the training split only, the WordPiece vocabularies of both
   models (`data`): one of both sides' text, used on both sides (`--joint-vocab true`, the
   default with our one embedding table), or one per side. They are cached in `--work-dir` and
   learned outside every budget.
2. Each model of `--models`, ours and keras-hub's (`models`), is trained and scored in its own
   subprocess, one after the other, so that each gets every core and its own peak memory
   (`worker`: this study again, with `--worker NAME`). Both train with the same loss, optimizer
   and schedule on the same batches, in the same order, for `--minutes` of training clock, and
   are scored along the way on a greedy BLEU curve (`train`). Then the whole test_2016_flickr
   split is translated by each model with the same two decodings and scored with sacreBLEU and
   chrF (`scoring`): beam search of `--beam-size` (4), the headline, and greedy. Ours' beam search
   ranks with our GNMT length penalty (`--length-penalty`, 1.4), keras-hub's
   (`keras_hub.samplers.BeamSampler` through `KerasHubTransformer.generate`, the peer's beam
   generation that the decoding-speed study times too) by summed log-probability: it has none.
3. The parent prints both models side by side under a header that names the CPU model and its
   matmul flags (`report`), writes the results as JSON (`--out`/`--name`.json, with the package
   versions, the CPU model and all its flags from /proc/cpuinfo, and the precision chosen) and
   plots BLEU against training minutes (`--out`/`--name`.png).

The measurements, and how the defaults were chosen, are in docs/benchmarks/multi30k.md; the
committed figures are in `results/`.
"""
