"""Masked-LM pre-training where labels are scarce: fine-tuned, from scratch and a linear probe, by label count.

    python -m benchmarks.language_models.pretraining            # topics, 30 .. 3,000 labels, seeds 0, 1, 2
    python -m benchmarks.language_models.pretraining --label-counts 30 --seeds 0 \
        --pretrain-max-steps 400                                 # a quick check
    python -m benchmarks.language_models.pretraining --corpus dates --label decade   # the typed dates instead
    python -m benchmarks.language_models.pretraining --help     # every flag

What runs (`study.compare_pretraining`, TensorFlow backend), per seed: a WordPiece vocabulary
with `<mask>` learned from `--corpus-size` unlabeled texts of the corpus's train split
(`--corpus topics`: sentences of a small grammar whose words all belong to the sentence's topic,
`keras_transformer.data.topic_sentences`, the class the topic; `--corpus dates`: typed dates, the
class `--label`); an encoder-only model (`--preset`) pre-trained on them as a masked language
model until its masked-piece accuracy on validation texts levels off (gains less than
`--plateau` over the last 20% of its steps) or `--pretrain-max-steps`; then, at each of
`--label-counts`, three classifiers of the same architecture (a head on `<s>`) from the same
initial weights, trained on the same first labelled examples for the same steps:

    fine_tuned  the encoder's weights copied from the pre-trained model, all weights trained
    scratch     no pre-training, all weights trained
    probe       the pre-trained encoder frozen, only the head trained (a linear probe)

each at every Noam scale of `--finetune-scales`; the scale most accurate on the validation
examples is the arm's, and its accuracy on `--test-size` test examples is reported.

Output: a table on stdout (per label count and arm, the mean over seeds and each seed's test
accuracy, the chosen scales; the masked LM's validation accuracy and steps per seed), the JSON
(`--name`.json, `pretraining.json` by default: settings, the precision chosen and why, versions,
CPU model and flags, every seed's results) and a PNG (`pretraining.png`: test accuracy against
label count, log x axis, the mean of the seeds and their min-max band) in the `--out` folder
(the study's `results/`, which holds the run docs/benchmarks/pretraining.md quotes).

The modules: `__main__` (the flags, the summary over seeds, the table and the plot) and `study`
(`compare_pretraining`, one seed's study).
"""
