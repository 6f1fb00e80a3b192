"""What the two lookup studies share: the flags of the task and its training, their checks, and the JSON.

The studies themselves are `keras_transformer.training.lookup.compare_variants` (the hard-attention
comparison, `python -m benchmarks.attention_family.lookup`) and `compare_scores` (every score
function, `python -m benchmarks.attention_family.lookup.scores`).
"""

from benchmarks.harness import flags, machine, results
from keras_transformer.config import TrainConfig

# The lookup studies' results and figures: this package's `results/`.
PACKAGE = "benchmarks.attention_family.lookup"


def add_task_flags(parser, names_flag, names_default, allowed, steps, every, name):
    """Add the flags the lookup studies share: what to compare, the seeds, the task, its training, the output.

    Args:
        parser: an `argparse.ArgumentParser`.
        names_flag: the flag naming what is compared, e.g. `"--variants"`.
        names_default: its default, a sequence of names.
        allowed: every name it may take.
        steps: int, the default `--steps`.
        every: int, the default `--every`.
        name: the default `--name`, the stem of the results' files.
    """
    parser.add_argument(
        names_flag,
        type=flags.parse_list(str, choices=allowed),
        default=",".join(names_default),
        help=f"Comma-separated, of {', '.join(allowed)}.",
    )
    flags.add_config_flags(
        parser, TrainConfig, "training (TrainConfig fields)", fields=("batch_size",), defaults={"batch_size": 64}
    )
    task = parser.add_argument_group("the task and its training")
    flags.add_seed_flags(task, default=(0, 1, 2), several=True, help="Initial weights, examples, noise.")
    task.add_argument("--steps", type=int, default=steps, help="Adam steps of each training.")
    task.add_argument("--every", type=int, default=every, help="Steps between two measurements.")
    task.add_argument("--pairs", type=int, default=16, help="Key-value pairs per example.")
    task.add_argument("--num-keys", type=int, default=64, help="Size of the key alphabet.")
    task.add_argument("--num-values", type=int, default=16, help="Size of the value alphabet (the classes).")
    task.add_argument("--width", type=int, default=32, help="Width of the embeddings.")
    task.add_argument(
        "--adam-learning-rate", type=float, default=3e-3, help="Adam's learning rate (constant: no Noam schedule)."
    )
    task.add_argument("--held-out", type=int, default=1000, help="Unseen examples of each accuracy measurement.")
    flags.add_output_flags(task, PACKAGE, name)


def check_task_flags(parser, args, held_out_minimum):
    """Check the flags of `add_task_flags` (`--name` is checked by `flags.parse`); exits with a message naming the flag.

    Args:
        parser: the `argparse.ArgumentParser`.
        args: its parsed namespace.
        held_out_minimum: int, the smallest `--held-out`.
    """
    flags.check_at_least(parser, args, ["steps", "every", "pairs", "num_keys", "num_values", "width"], 1)
    flags.check_at_least(parser, args, ["held_out"], held_out_minimum)
    flags.config_from_flags(parser, args, TrainConfig)  # --batch-size
    if args.pairs > args.num_keys:
        parser.error(f"--pairs must be at most --num-keys. Received: {args.pairs} > {args.num_keys}")


def task_settings(args):
    """The keyword arguments of `compare_variants` and `compare_scores` that the flags of `add_task_flags` set."""
    return {
        "steps": args.steps,
        "every": args.every,
        "batch_size": args.batch_size,
        "pairs": args.pairs,
        "num_keys": args.num_keys,
        "num_values": args.num_values,
        "width": args.width,
        "learning_rate": args.adam_learning_rate,
        "held_out": args.held_out,
    }


def write_results(args, module, settings, names, summary, runs, cpu):
    """Write a lookup study's JSON: command, settings, machine, versions, summary and every seed's runs.

    Args:
        args: the parsed flags (`seeds`, `argv`, `--out` and `--name`).
        module: the module the command runs, e.g. `"benchmarks.attention_family.lookup.scores"`.
        settings: the study's settings.
        names: `{"variants": [...]}` or `{"scores": [...]}`, what was compared.
        summary: the study's summary.
        runs: list, each seed's results, in the order of `args.seeds`.
        cpu: `machine.cpu_info()`.

    Returns:
        the path written, `--out` / `--name`.json.
    """
    data = {
        "command": results.command_line(module, args.argv),
        "settings": {**settings, **names, "seeds": args.seeds, "precision": "float32"},
        "machine": machine.machine(cpu),
        "versions": machine.package_versions({"tensorflow": "tensorflow", "keras": "keras", "numpy": "numpy"}),
        "summary": summary,
        "runs": {str(seed): run for seed, run in zip(args.seeds, runs)},
    }
    return results.write_json(flags.output_path(args), data)
