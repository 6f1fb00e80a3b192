"""The BLEU check of the study: the faster precision must not cost translation quality."""

import tempfile

from keras_transformer.config import TrainConfig


def bleu_by_precision(args, policies):
    """Our model on the built-in corpus, `--bleu-epochs` epochs, once per policy: test BLEU."""
    from keras_transformer import runs

    scores = {}
    with tempfile.TemporaryDirectory() as folder:
        for precision in policies:
            config = TrainConfig(
                epochs=args.bleu_epochs,
                precision=precision,
                jit_compile=args.jit_compile,
                run_dir=f"{folder}/{precision}",
                export_dir=f"{folder}/exports",
                seed=args.seed,
            )
            summary = runs.train(config, log=lambda message: None, verbose=0, export=False)
            scores[precision] = {
                "bleu": summary["test"]["bleu"],
                "exact_match": summary["test"]["exact_match"],
                "target_tokens_per_second": summary.get("target_tokens_per_second"),
                "train_seconds": summary["train_seconds_this_session"],
            }
            score = scores[precision]
            print(
                f"  built-in corpus, {args.bleu_epochs} epochs, {precision}: test BLEU {score['bleu']:.2f}, "
                f"exact match {score['exact_match']:.1%}, {score['train_seconds']:.0f} s",
                flush=True,
            )
    return scores
