"""The benchmark pages in docs/benchmarks/ quote the committed results of their studies, figure for figure.

These checks once ran inside the walkthrough notebooks, which read the pages; they are project
maintenance, not teaching, so they live here. Each reads a study's committed JSON and its page.
"""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "benchmarks"
VISION = ROOT / "benchmarks" / "vision"


def _json(path):
    return json.loads(Path(path).read_text())


def _row(page, row_start):
    """The first table row of `page` that starts with `row_start` (asserted to exist)."""
    row = next((line for line in page.splitlines() if line.startswith(row_start)), None)
    assert row is not None, row_start
    return row


def test_the_scaling_page_quotes_the_runs_medians():
    results = _json(ROOT / "benchmarks" / "attention_family" / "length_scaling" / "results" / "scaling.json")
    page = (PAGES / "scaling.md").read_text()
    models = results["models"]
    for i, n in enumerate(results["lengths"]):
        times = " | ".join(f"{models[name]['ms_per_step_median'][i]:.2f}" for name in ("self_attention", "gru", "conv"))
        assert f"| {n} | {times} |" in page, (n, times)


def test_the_stn_page_quotes_both_seeds_accuracies():
    models = _json(VISION / "stn" / "results" / "vision_stn.json")["models"]
    page = (PAGES / "vision-stn.md").read_text()
    for entry in models.values():
        first, second = entry["test_accuracy_percent"]
        assert f"| {entry['label']} | {first:.1f}% | {second:.1f}% |" in page, entry["label"]


FINE_HEADING = "## Fine-grained glyphs"  # vision.md: the digits table comes before it, the fine one after


@pytest.mark.parametrize("glyphs, part", [("vision_attention.json", 0), ("vision_attention_fine.json", 1)])
def test_the_vision_page_quotes_every_models_accuracies(glyphs, part):
    models = _json(VISION / "attention" / "results" / glyphs)["models"]
    page = (PAGES / "vision.md").read_text().split(FINE_HEADING)[part]
    for model in models.values():
        seeds = " / ".join(f"{accuracy:.1f}" for accuracy in model["test_accuracy_percent"])
        row_start = f"| {model['label']} | {model['parameters']:,} |"
        row = _row(page, row_start)
        assert f"| {seeds} | {model['test_accuracy_percent_mean']:.1f} |" in row, row


VIT_RUNS = ("vision_vit", "vision_vit_lr5e-4", "vision_vit_6k_cnn_curves", "vision_vit_6k_vit_curves",
            "vision_vit_30k_cnn_curves", "vision_vit_30k_vit_curves")  # fmt: skip


@pytest.mark.parametrize("name", VIT_RUNS)
def test_the_vision_pages_vit_section_quotes_both_seeds_of_every_run(name):
    models = _json(VISION / "attention" / "results" / f"{name}.json")["models"]
    page = (PAGES / "vision.md").read_text()
    section = page.split("## A Vision Transformer beside the CNN")[1].split("\n## ")[0]
    for model in models.values():
        seeds = " / ".join(f"{accuracy:.1f}" for accuracy in model["test_accuracy_percent"])
        assert f"{seeds}%" in section, (name, model["label"], seeds)


BN_HEADING = "## Batch normalization, trained until the curves level off"
BN_RUNS = (
    "vision_attention_bn_fine_curves",
    "vision_attention_bn_lr1e-2_fine_curves",
    "vision_attention_bn_6000_fine_curves",
)


@pytest.mark.parametrize("name", BN_RUNS)
def test_the_vision_pages_batch_norm_section_quotes_every_seed_and_the_validation_it_chose_on(name):
    run = _json(VISION / "attention" / "results" / f"{name}.json")
    section = (PAGES / "vision.md").read_text().split(BN_HEADING)[1].split("\n## ")[0]
    learning_rate, steps = f"{run['settings']['learning_rate']:g}", f"{run['settings']['steps']:,}"
    for model in run["models"].values():
        row_start = f"| {model['label']} | {learning_rate} | {steps} |"
        row = _row(section, row_start)
        seeds = " / ".join(f"{accuracy:.1f}" for accuracy in model["test_accuracy_percent"])
        validation = model["curve"][-1]["validation_accuracy_percent_mean"]
        assert f"| {validation:.1f} | {seeds} | {model['test_accuracy_percent_mean']:.1f} |" in row, row


DCN_SECTIONS = {
    "vision_dcn_paper": "## The paper's build",
    "vision_dcn_paper_bn_fine": "## Normalizing the fine network too",
}


@pytest.mark.parametrize("name", sorted(DCN_SECTIONS))
def test_the_dcn_page_quotes_every_run_of_the_papers_build_and_marks_the_hint_weight_validation_chose(name):
    runs = _json(VISION / "dcn" / "results" / f"{name}.json")["runs"]
    section = (PAGES / "vision-dcn.md").read_text().split(DCN_SECTIONS[name])[1].split("\n## ")[0]
    labels = {"coarse": "coarse only", "fine": "fine everywhere"}
    for run in runs:
        label = labels.get(run["mode"]) or f"DCN, hint {run['hint_weight']:g}"
        label = f"**{label}** (chosen)" if run.get("chosen") else label
        row = _row(section, f"| {label} | {run['seed']} |")
        accuracies = f"| {run['validation_accuracy_percent']:.1f} | {run['test_accuracy_percent']:.1f} |"
        assert f"{accuracies} {run['flops'] / 1e6:.2f} |" in row, row
        if run["mode"] == "dcn":
            glyph = run["on_glyph"]
            assert (
                f"| {glyph['share']:.2f} ({glyph['chance']:.2f}) | {run['coarse_head_test_accuracy_percent']:.1f} |"
                in row
            )


SCALE_ROWS = {  # the per-pixel runs' models and the label of their row on the scale page
    ("vision_scale_pixel", "one"): "one scale (control)",
    ("vision_scale_pixel", "average"): "average over scales",
    ("vision_scale_pixel", "max"): "max over scales",
    ("vision_scale_pixel", "attention"): "attention to scale, the paper's head",
    ("vision_scale_pixel_head_norm", "attention"): "attention, head's input normalized",
    ("vision_scale_pixel_t10", "attention"): "**attention, normalized, temperature 10** (the defaults)",
}


@pytest.mark.parametrize("name, model", sorted(SCALE_ROWS))
def test_the_scale_page_quotes_every_seed_and_tercile_of_the_per_pixel_runs(name, model):
    entry = _json(VISION / "scale" / "results" / f"{name}.json")["models"][model]
    section = (PAGES / "vision-scale.md").read_text().split("## Per pixel, as the paper trains it")[1].split("\n## ")[0]
    row = _row(section, f"| {SCALE_ROWS[name, model]} |")
    seeds = " / ".join(f"{accuracy:.1f}" for accuracy in entry["test_accuracy_percent"])
    terciles = " | ".join(f"{entry['tercile_accuracy_percent'][t]:.1f}" for t in ("small", "medium", "large"))
    expected = f"| {seeds} | {entry['mean_accuracy_percent']:.1f} | {terciles} | {entry['forward_flops'] / 1e6:.2f} |"
    assert row.endswith(expected), (row, expected)


RAM_CONVERGENCE = "## At convergence: fresh canvases, the paper's clutter and its CNN"


def test_the_ram_page_quotes_every_seed_of_the_convergence_run_and_where_each_glimpse_lands():
    results = _json(VISION / "ram" / "results" / "vision_ram_convergence.json")
    section = (PAGES / "vision-ram.md").read_text().split(RAM_CONVERGENCE)[1].split("\n## ")[0]
    labels = {"cnn": "CNN, 3 residual blocks", "paper_cnn": "the paper's CNN"}
    for name, entry in results["summary"].items():
        label = labels.get(name) or f"RAM, T = {name.split('_')[1]}"
        seeds = " | ".join(f"{accuracy:.1f}%" for accuracy in entry["accuracy_by_seed"])
        row = _row(section, f"| {label} |")
        assert row.startswith(
            f"| {label} | {seeds} | {entry['mean_accuracy_percent']:.1f}% | {entry['values_read']:,} |"
        )
        for run in results["runs"]:
            if run["model"] == "ram" and f"ram_{run['glimpses']}" == name:
                where = run["where"]
                assert ", ".join(f"{d:.1f}" for d in where["distance_px"]) in row, (row, run["seed"])
                assert f"{where['sharp_patch_holds_centre'][-1]:.2f}" in row, (row, run["seed"])


def test_the_ram_page_quotes_the_papers_cnn_trained_twice_as_long():
    runs = _json(VISION / "ram" / "results" / "vision_ram_paper_cnn_long.json")["runs"]
    section = (PAGES / "vision-ram.md").read_text().split(RAM_CONVERGENCE)[1].split("\n## ")[0]
    for model, label in (("paper_cnn", "the paper's CNN"), ("ram", "RAM, T = 1")):
        seeds = [run for run in runs if run["model"] == model]
        accuracy = " | ".join(f"{run['test_accuracy_percent']:.1f}%" for run in seeds)
        curves = "; ".join(
            ", ".join(f"{p['validation_accuracy_percent']:.1f}" for p in run["curve"][-3:]) for run in seeds
        )
        assert f"| {label} | {accuracy} | {curves} |" in section, (label, accuracy, curves)
