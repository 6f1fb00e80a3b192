"""Our decoder-only and encoder-only language models against keras-hub's GPT-2 and BERT at equal size.

    python benchmarks/language_models.py                 # small preset, V 8000; JSON to benchmarks/results/
    python benchmarks/language_models.py --preset tiny --vocab 200 --batch-size 4 --length 16 \
        --prompt-length 4 --new-tokens 4 --steps 2 --rounds 1 --peak-size 128     # a quick check

What runs:

- Two worker processes (this script with `--worker NAME`), one per library, each building its
  models once under the `--precision` dtype policy (`auto` is resolved by each worker with
  `keras_transformer.precision.choose_precision`, and both must agree), and waiting for orders
  on stdin. The models are language_models_build.py's; the orders, language_models_worker.py's.
- Training (a): the parent tells the workers, in turn, to train one round of one kind:
  `model.fit` for `--steps` steps on the same `--batches` synthetic batches, in the same order.
  The order of the two alternates every round (ABBA), so slow drift of the machine falls on both
  alike; only one worker runs at a time. The first `--warmup-rounds` rounds (tracing) are not
  counted. Decoder batches are packed causal-LM windows: `--batch-size` rows of `--length + 1`
  seeded random ids, the first `--length` the inputs and the last `--length` the labels, no
  padding, so every position is a target (target tokens = B x T per step). Encoder batches are
  masked-LM rows from `keras_transformer.data.masked_lm_dataset` over seeded random texts of
  `--length // 2 .. --length` tokens (`<s>` and `</s>` included, padded to `--length`): 15% of the
  pieces selected (80% `<mask>`, 10% random, 10% kept), labels 0 at every other position, so the
  loss of both models counts the masked positions only. Each worker makes the batches itself and
  reports their checksum; the parent checks that the two are equal.
  Tokens/s is real (non-padding) input tokens per second of a round; for the decoder these are
  its target tokens, for the encoder the report also gives the masked (predicted) tokens/s.
  Medians over the rounds, and the ratio of the medians ours / keras-hub. Each round also records
  the worker's CPU seconds (`time.process_time`: user and system time of all its threads), and
  the report gives tokens per CPU-second and their ratio beside the wall-clock figures: on a
  machine shared with other jobs a round's wall-clock time depends on how much of the CPU the
  others left it, its CPU time much less so (the work, not the waiting; though contention still
  costs caches). On an idle machine the wall-clock ratio is the one that counts, since it also
  sees how well each model keeps the cores busy.
- Generation (b), decoder only: `--batch-size` prompts of `--prompt-length` seeded random ids,
  `--new-tokens` new tokens each, greedy (`keras_hub.samplers.GreedySampler` for both), no stop
  token (every row gets every new token), each wrapped once in `tf.function` (XLA with `--jit`),
  warmed up once, then timed `--rounds` times, alternating ABBA:
    ours               `keras_transformer.decoding.generation.generate(model, prompts, P + N, sampler,
                       end_id=None)`: prefill over the P prompt columns, then one cached step a token
    keras-hub          `GPT2CausalLM(backbone, preprocessor=None).call_with_cache` driven by the
                       same sampler the way `GPT2CausalLM.generate_step` drives it, but with the
                       prefill over the P prompt columns only: the same work as ours (the ratio)
    keras-hub generate `GPT2CausalLM.generate({"token_ids", "padding_mask"}, stop_token_ids=None)`
                       compiled with `sampler="greedy"`: keras-hub's own path, whose prefill runs
                       over all P + N columns (reported beside, with its ratio)
  New tokens/s = B x N / seconds of a call (and per CPU-second, as for training). After the
  warm-up, each cached generation is checked on two rows against the model's own uncached greedy
  decode (the whole model re-run on the whole prefix at each step); the JSON records the
  fraction of equal tokens.
- Model-FLOPs utilisation (MFU) of training, against the float32 matmul peak that the `ours`
  worker measures first, alone: language_models_workload.py says how, and which FLOPs it counts.

What is matched between the libraries' models, and what is not: language_models_build.py
(recorded in the JSON under `architecture`).

How to read it: ratios above 1 mean ours is faster. Timings on a shared machine are noisy:
compare the ratios within a run rather than seconds across runs; the JSON (`--out`) keeps every
round's figure. The weights are random (and briefly trained), so the generated tokens mean
nothing; the cost of a step does not depend on them.

The modules: this one holds the command line and `main`; language_models_workload.py the model
sizes, batches and FLOP count both workers share; language_models_build.py the models and their
generation; language_models_worker.py a worker; language_models_parent.py the parent's rounds and
their summaries; language_models_report.py the tables and the JSON.
"""

import argparse
import sys

import common
from language_models_parent import race, start_workers
from language_models_report import print_report, results_json
from language_models_worker import run_worker
from language_models_workload import FIRST_PIECE_ID, KINDS, MODELS

from keras_transformer.config import PRECISIONS, PRESETS


def parse_args(argv=None):
    """The benchmark's flags, checked (`argv`: `sys.argv[1:]` when `None`)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=common.DefaultsHelpFormatter)
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS), help="Model size of all the models.")
    parser.add_argument("--vocab", type=int, default=8000, help="Vocabulary size V.")
    parser.add_argument("--batch-size", type=int, default=16, help="Rows per training batch, and prompts generated.")
    parser.add_argument("--length", type=int, default=64, help="Training sequence length T.")
    parser.add_argument("--prompt-length", type=int, default=16, help="Tokens of every prompt (generation).")
    parser.add_argument("--new-tokens", type=int, default=48, help="Tokens generated after every prompt.")
    parser.add_argument("--kinds", default=",".join(KINDS), help="Comma-separated subset of: decoder,encoder.")
    parser.add_argument(
        "--positions",
        default="learned",
        choices=("learned", "sinusoid"),
        help="Our models' positions: learned (as GPT-2's and BERT's) or the tutorial's sinusoids.",
    )
    parser.add_argument(
        "--precision",
        default="auto",
        choices=PRECISIONS,
        help="Dtype policy of all models; auto is mixed_bfloat16 where bfloat16 is native, else float32.",
    )
    parser.add_argument("--jit", action="store_true", help="Compile training steps and generation with XLA.")
    parser.add_argument("--steps", type=int, default=10, help="Training steps per round.")
    parser.add_argument("--rounds", type=int, default=5, help="Counted rounds per model (training and generation).")
    parser.add_argument("--warmup-rounds", type=int, default=1, help="Training rounds run first and not counted.")
    parser.add_argument("--batches", type=int, default=8, help="Distinct synthetic batches, cycled.")
    parser.add_argument("--peak-size", type=int, default=2048, help="Matrix size of the matmul peak measurement.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the weights, batches and prompts.")
    parser.add_argument("--out", default="benchmarks/results/language_models.json", help="JSON results file.")
    parser.add_argument("--worker", choices=MODELS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # workers get the same flags
    args.kinds = [name.strip() for name in args.kinds.split(",") if name.strip()]
    if not args.kinds or sorted(set(args.kinds) - set(KINDS)):
        parser.error(f"--kinds takes names from {','.join(KINDS)}; received {args.kinds or 'nothing'}")
    args.kinds = [kind for kind in KINDS if kind in args.kinds]
    common.check_at_least(parser, args, ("batch_size", "steps", "rounds", "batches", "peak_size"), 1)
    common.check_at_least(parser, args, ("prompt_length", "new_tokens"), 1)
    common.check_at_least(parser, args, ("warmup_rounds",), 0)
    common.check_at_least(parser, args, ("length",), 3)  # a masked-LM row is <s> piece </s> at least
    common.check_at_least(parser, args, ("vocab",), FIRST_PIECE_ID + 2)
    return args


def main(argv=None):
    """The parent's run (peak, training, generation, report, JSON), or with `--worker` a worker."""
    args = parse_args(argv)
    if args.worker:
        return run_worker(args)
    cpu = common.cpu_info()
    workers, ready = start_workers(args)
    precision = ready["ours"]["precision"]
    print(f"precision {args.precision}: {precision['policy']} ({precision['reason']})", flush=True)
    peak, training, generation = race(args, workers, ready)
    print_report(args, cpu, precision, peak, training, generation)
    results = results_json(args, cpu, precision, peak, training, generation)
    print(f"wrote {common.write_json(args.out, results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
