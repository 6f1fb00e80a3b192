"""Tests of `benchmarks.translation.multi30k`: its flags, configs, report, curve, cooldown, vocabularies, decodings.

Not of BLEU: the study measures that. The corpora here are tiny fakes with Multi30k's file names.
"""

import gzip
import json
import types

import keras
import pytest
import tensorflow as tf
from conftest import ROOT
from test_benchmark_harness import X86_CPUINFO  # a /proc/cpuinfo of two processors

from benchmarks.harness import machine
from benchmarks.translation.multi30k import __main__ as multi30k
from benchmarks.translation.multi30k import data, models, report, scoring, train
from keras_transformer.config import variant_switches


def fake_multi30k_result(name, parameters, steps, bleu, greedy_bleu=None):
    """A worker result with the fields the study's report and comparison read: beam 4 and greedy scores."""
    return {
        "model": name,
        "decoding": "beam 4, alpha 1.4" if name == "ours" else "beam 4, log-prob",
        "parameters": parameters,
        "vocab_sizes": [118, 104],
        "train_pairs": 300,
        "dropped_pairs": 0,
        "batch_fingerprint": "same",
        "train": {"minutes": 0.5, "steps": steps, "epochs": 1.0, "target_tokens_per_second_median": 100},
        "peak_rss_mib": 1000.0,
        "curve": [{"minutes": 0.5, "steps": steps, "bleu": bleu}],
        "test": {"bleu": bleu, "chrf": 40.0, "sentences": 40, "bleu_signature": "nrefs:1"},
        "test_greedy": {"bleu": bleu if greedy_bleu is None else greedy_bleu, "chrf": 39.0},
        "wall_seconds": {"scoring": 10.0},
    }


def multi30k_folder(folder):
    """`folder` with Multi30k's file names (empty files): what `multi30k.py --data` checks for."""
    for split in ("train", "val", "test_2016_flickr"):
        for language in ("de", "en"):
            (folder / f"{split}.{language}.gz").touch()
    return folder


def test_multi30k_report_prints_the_cpu_ratios_and_bleu_differences(tmp_path, capsys):
    multi30k_folder(tmp_path)
    args = multi30k.parse_args(["--data", str(tmp_path), "--minutes", "0.5", "--curve-sentences", "20"])
    results = {
        "ours": fake_multi30k_result("ours", 31_912, 30, 12.5, greedy_bleu=11.0),
        "keras-hub": fake_multi30k_result("keras-hub", 34_472, 20, 10.25, greedy_bleu=9.5),
    }
    report.print_report(args, results, machine.parse_cpuinfo(X86_CPUINFO))
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == machine.cpu_line(machine.parse_cpuinfo(X86_CPUINFO))
    assert f"{'parameters':<34}{'31,912':>18}{'34,472':>18}{'0.93x':>18}" in lines
    assert f"{'steps':<34}{'30':>18}{'20':>18}{'1.50x':>18}" in lines
    # Beam search against beam search, then greedy against greedy: the same decodings side by side.
    assert f"{'test_2016 BLEU (40 sent.)':<34}{'12.50':>18}{'10.25':>18}{'+2.25':>13} BLEU" in lines
    assert f"{'  decoding':<34}{'beam 4, alpha 1.4':>18}{'beam 4, log-prob':>18}" in lines
    assert f"{'test_2016 BLEU, greedy':<34}{'11.00':>18}{'9.50':>18}{'+1.50':>13} BLEU" in lines
    assert f"{'test_2016 chrF, greedy':<34}{'39.00':>18}{'39.00':>18}" in lines
    reached = "ours reached keras-hub's curve BLEU at 0.5 min (10.25) at 0.5 min (100% of the time;"
    assert lines[-2] == f"{reached} linear between curve points)"
    assert lines[-1] == "same batches (first 20 fingerprinted): yes"
    assert report.comparison(results) == {
        "ours_minutes_to_keras_hub_final_curve_bleu": 0.5,
        "keras_hub_curve_minutes": 0.5,
        "test_decodings": {"ours": "beam 4, alpha 1.4", "keras-hub": "beam 4, log-prob"},
        "test_bleu_ours_minus_keras_hub": 2.25,
        "test_chrf_ours_minus_keras_hub": 0.0,
        "test_greedy_bleu_ours_minus_keras_hub": 1.5,
        "test_greedy_chrf_ours_minus_keras_hub": 0.0,
        "target_tokens_per_second_ours_over_keras_hub": 1.0,
        "steps_ours_over_keras_hub": 1.5,
        "peak_rss_ours_over_keras_hub": 1.0,
        "same_batches": True,
    }


def test_multi30k_finds_when_a_curve_first_reaches_a_score():
    curve = [{"minutes": m, "bleu": b} for m, b in ((5, 10.0), (10, 20.0), (15, 18.0), (20, 30.0))]
    assert report.minutes_to_reach(curve, 15.0) == 7.5  # halfway from 10 to 20 BLEU, 5 to 10 minutes
    assert report.minutes_to_reach(curve, 24.0) == 17.5  # from the dip at 15 minutes (18 BLEU)
    assert report.minutes_to_reach(curve, 5.0) == 5  # already at the first point
    assert report.minutes_to_reach(curve, 30.5) is None


@pytest.mark.parametrize(
    "flags, expected",
    [
        ([], ("per_head", 0.9999, 3.0, "all", True)),
        (["--recipe", "tutorial"], ("glorot", 0.0, 9.0, "none", False)),
        (["--ema-momentum", "0.99"], ("per_head", 0.99, 3.0, "all", True)),
        (["--recipe", "tutorial", "--attention-initialization", "per_head"], ("per_head", 0.0, 9.0, "none", False)),
        (["--ema-momentum", "0.998", "--ema-ramp", "9"], ("per_head", 0.998, 9.0, "all", True)),
        (["--embedding-sharing", "none"], ("per_head", 0.9999, 3.0, "none", False)),
        (["--recipe", "tutorial", "--joint-vocab", "true"], ("glorot", 0.0, 9.0, "none", True)),
    ],
)
def test_multi30k_trains_ours_by_the_best_recipe_unless_told_otherwise(tmp_path, flags, expected):
    args = multi30k.parse_args(["--data", str(multi30k_folder(tmp_path)), "--minutes", "30", *flags])
    settings = ("attention_initialization", "ema_momentum", "ema_ramp", "embedding_sharing", "joint_vocab")
    assert tuple(getattr(args, name) for name in settings) == expected


def test_multi30k_ema_ramp_reaches_our_optimizer_and_refuses_a_ramp_below_1(tmp_path, capsys):
    flags = ["--data", str(multi30k_folder(tmp_path)), "--minutes", "30"]
    args = multi30k.parse_args([*flags, "--ema-ramp", "5"])
    assert models.worker_train_config(args, "ours").ema_ramp == 5.0
    assert "weight averaging 0.9999 (ramp 5)" in report.report_header(
        args, {"vocab_sizes": [8, 8], "train_pairs": 15, "dropped_pairs": 0}
    )
    with pytest.raises(SystemExit):
        multi30k.parse_args([*flags, "--ema-ramp", "0.5"])
    assert "`ema_ramp` must be a number >= 1. Received: ema_ramp=0.5" in capsys.readouterr().err


def test_multi30k_lr_cooldown_flag_sets_ours_only_and_refuses_a_share_outside_0_1(tmp_path, capsys):
    flags = ["--data", str(multi30k_folder(tmp_path)), "--minutes", "30"]
    args = multi30k.parse_args([*flags, "--lr-cooldown", "0.25"])
    assert models.worker_train_config(args, "ours").lr_cooldown == 0.25
    assert models.worker_train_config(args, "keras-hub").lr_cooldown == 0.0
    assert "learning-rate cooldown over the last 25%" in report.report_header(
        args, {"vocab_sizes": [8, 8], "train_pairs": 15, "dropped_pairs": 0}
    )
    for share in ("1", "-0.1"):
        with pytest.raises(SystemExit):
            multi30k.parse_args([*flags, "--lr-cooldown", share])
        assert f"`lr_cooldown` must be a number in [0, 1). Received: lr_cooldown={float(share)}" in (
            capsys.readouterr().err
        )


def test_multi30k_cooldown_ends_where_the_clock_will_reach_the_budget():
    clock = train.TrainingClock(budget_seconds=100.0)
    optimizer = types.SimpleNamespace(cooldown_end_step=keras.Variable(123.0), iterations=keras.Variable(0))
    cooldown = train.CooldownToBudget(clock)
    cooldown.set_model(types.SimpleNamespace(optimizer=optimizer))
    cooldown.on_train_begin()
    assert float(optimizer.cooldown_end_step) == 0.0  # not known before the first chunk
    clock.seconds = lambda: 10.0
    clock.chunk_seconds, clock.chunk_steps = [10.0], [100]  # the first chunk, tracing included
    optimizer.iterations.assign(100)
    cooldown.on_epoch_end(0)
    assert float(optimizer.cooldown_end_step) == 100 + 90 * 10  # 10 steps/s for the 90 s left
    clock.seconds = lambda: 30.0
    clock.chunk_seconds, clock.chunk_steps = [10.0, 10.0, 10.0], [100, 200, 400]
    optimizer.iterations.assign(700)
    cooldown.on_epoch_end(2)
    assert float(optimizer.cooldown_end_step) == 700 + 70 * 30  # the first chunk left out: 600 steps in 20 s
    assert cooldown.end_steps == [1000, 2800]


def test_multi30k_dropout_flag_sets_ours_only_and_refuses_a_rate_outside_0_1(tmp_path, capsys):
    folder = multi30k_folder(tmp_path)
    args = multi30k.parse_args(["--data", str(folder), "--minutes", "30", "--dropout-rate", "0.3"])
    joint = types.SimpleNamespace(vocab_size=100)  # the recipe's one vocabulary on both sides
    vocabularies = types.SimpleNamespace(source_tokenizer=joint, target_tokenizer=joint)
    rates = {}
    for name in ("ours", "keras-hub"):
        run_dir = tmp_path / name
        run_dir.mkdir()
        rates[name] = models.save_worker_configs(args, name, vocabularies, run_dir)[0].dropout_rate
    assert rates == {"ours": 0.3, "keras-hub": 0.1}  # keras-hub keeps the medium preset's rate

    for rate in ("1", "-0.1"):
        with pytest.raises(SystemExit):
            multi30k.parse_args(["--data", str(folder), "--minutes", "30", "--dropout-rate", rate])
        assert f"`dropout_rate` must be a number in [0, 1). Received: dropout_rate={float(rate)}" in (
            capsys.readouterr().err
        )


def test_multi30k_attention_residual_dropout_sets_ours_only_and_refuses_a_rate_outside_0_1(tmp_path, capsys):
    folder = multi30k_folder(tmp_path)
    args = multi30k.parse_args(["--data", str(folder), "--minutes", "30", "--attention-residual-dropout-rate", "0.1"])
    joint = types.SimpleNamespace(vocab_size=100)
    vocabularies = types.SimpleNamespace(source_tokenizer=joint, target_tokenizer=joint)
    rates = {}
    for name in ("ours", "keras-hub"):
        run_dir = tmp_path / name
        run_dir.mkdir()
        config = models.save_worker_configs(args, name, vocabularies, run_dir)[0]
        rates[name] = variant_switches(config)["attention_residual_dropout_rate"]
    assert rates == {"ours": 0.1, "keras-hub": 0.0}
    with pytest.raises(SystemExit):
        multi30k.parse_args(["--data", str(folder), "--minutes", "30", "--attention-residual-dropout-rate", "1"])
    assert (
        "`attention_residual_dropout_rate` must be a number in [0, 1). Received: attention_residual_dropout_rate=1.0"
        in (capsys.readouterr().err)
    )


def test_multi30k_late_dropout_starts_after_its_epochs_of_batches_for_ours_only(tmp_path, capsys):
    from keras_transformer.data.translation_batches import EncodedPairs

    folder = multi30k_folder(tmp_path)
    flags = ["--data", str(folder), "--minutes", "30", "--batch-size", "4", "--late-dropout", "0.3"]
    lengths = [3] * 10 + [20] * 5  # two length buckets: 3 + 2 batches of up to 4 pairs in one pass
    ids = tf.ragged.constant([[5] * n for n in lengths], dtype=tf.int32)
    pairs = EncodedPairs(ids, ids, num_dropped=0)
    model_config = types.SimpleNamespace(dropout_rate=0.1)

    args = multi30k.parse_args([*flags, "--late-dropout-epochs", "2.5"])
    late = train.late_dropout(args, "ours", model_config, pairs)
    assert (late.rate, late.start_step, late.from_rate) == (0.3, round(2.5 * 5), 0.1)
    assert train.late_dropout(args, "keras-hub", model_config, pairs) is None
    assert "dropout the preset's raised to 0.3 after 2.5 epochs" in report.report_header(
        args, {"vocab_sizes": [8, 8], "train_pairs": 15, "dropped_pairs": 0}
    )
    assert train.late_dropout(multi30k.parse_args(flags[:-2]), "ours", model_config, pairs) is None  # off

    for bad, message in [
        (["--late-dropout", "1"], "--late-dropout must be in [0, 1). Received: 1.0"),
        (["--late-dropout-epochs", "-1"], "--late-dropout-epochs must be >= 0. Received: -1.0"),
        (["--dropout-rate", "0"], "--late-dropout raises our model's dropout rate, which is 0 here"),
        (["--preset", "tiny"], "--late-dropout raises our model's dropout rate, which is 0 here"),  # the preset's
    ]:
        with pytest.raises(SystemExit):
            multi30k.parse_args([*flags, *bad])
        assert message in capsys.readouterr().err
    assert multi30k.parse_args([*flags, "--preset", "tiny", "--dropout-rate", "0.1"]).late_dropout == 0.3


class _EchoTranslator:
    """A stand-in for our `Translator` that returns each source as its translation, or `word` for every one."""

    def __init__(self, word=None):
        self.word = word

    def translate(self, batch):
        texts = batch.numpy() if self.word is None else [self.word.encode()] * int(batch.shape[0])
        return {"translation": tf.constant(texts)}


def test_multi30k_validation_decodings_score_the_whole_validation_split_per_setting(tmp_path, capsys):
    sentences = [f"a dog number {i} runs on the green grass ." for i in range(300)]
    for language in ("de", "en"):
        with gzip.open(multi30k_folder(tmp_path) / f"val.{language}.gz", "wt") as file:
            file.write("\n".join(sentences) + "\n")
    flags = ["--data", str(tmp_path), "--minutes", "30", "--validation-decodings", " 1:0, 4:0.6,4:1.5 "]
    args = multi30k.parse_args(flags)
    assert args.validation_decodings == [(1, 0.0), (4, 0.6), (4, 1.5)]
    asked = []

    def translator(beam_size, length_penalty=None):  # the worker's factory: settings in, a translator out
        asked.append((beam_size, length_penalty))
        return _EchoTranslator(None if length_penalty == 0.6 else "grass")

    scores = scoring.score_validation_decodings(args, translator)
    assert asked == [(1, 0.0), (4, 0.6), (4, 1.5)]
    assert [(s["beam_size"], s["length_penalty"], s["sentences"]) for s in scores] == [
        (1, 0.0, 300),
        (4, 0.6, 300),
        (4, 1.5, 300),
    ]
    assert scores[1]["bleu"] == 100.0 and scores[0]["bleu"] < 1 and scores[2]["bleu"] < 1
    assert "ours: validation BLEU 100.00, chrF 100.00 (beam 4, alpha 0.6)" in capsys.readouterr().out

    result = fake_multi30k_result("ours", 31_912, 30, 12.5) | {"validation_decodings": scores}
    report.print_report(args, {"ours": result}, machine.parse_cpuinfo(X86_CPUINFO))
    assert "ours on validation (300 sent.), beam 4, alpha 0.6: BLEU 100.00, chrF 100.00" in capsys.readouterr().out

    for bad in ("4", "0:0.6", "4:-1", "four:0.6", "4:0.6:1"):
        with pytest.raises(SystemExit):
            multi30k.parse_args([*flags[:-1], bad])
        assert f"--validation-decodings takes BEAM:ALPHA items, BEAM >= 1, ALPHA >= 0. Received: {bad!r}" in (
            capsys.readouterr().err
        )
    assert multi30k.parse_args(flags[:-2]).validation_decodings == []


def test_multi30k_refuses_one_shared_table_over_two_vocabularies(tmp_path, capsys):
    flags = ["--minutes", "30", "--embedding-sharing", "all", "--joint-vocab", "false"]
    with pytest.raises(SystemExit):
        multi30k.parse_args(["--data", str(multi30k_folder(tmp_path)), *flags])
    assert "all embeds both sides with one table: it needs --joint-vocab true" in capsys.readouterr().err


def test_multi30k_joint_vocabulary_is_one_vocabulary_learned_from_both_sides(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    sentences = {"de": "ein hund läuft über die wiese", "en": "a dog runs across the meadow"}
    for split in ("train", "val", "test_2016_flickr"):
        for language, sentence in sentences.items():
            with gzip.open(folder / f"{split}.{language}.gz", "wt", encoding="utf-8") as file:
                file.write(f"{sentence}\n" * 20)
    flags = [
        "--data",
        str(folder),
        "--minutes",
        "1",
        "--source-vocab-size",
        "200",
        "--work-dir",
        str(tmp_path / "work"),
    ]
    paths = {}
    for joint, sharing in (("true", "all"), ("false", "none")):
        args = multi30k.parse_args([*flags, "--joint-vocab", joint, "--embedding-sharing", sharing])
        sizes = data.prepare_vocabularies(args)
        paths[joint] = data.vocabulary_paths(args)
        source, target = (set(paths[joint][side].read_text().split()) for side in ("source", "target"))
        assert {"hund", "wiese"} <= source and {"dog", "meadow"} <= target
        if joint == "true":
            assert source == target and sizes["source_size"] == sizes["target_size"]
        else:
            assert "dog" not in source and "hund" not in target
    assert paths["true"]["source"].parent != paths["false"]["source"].parent  # cached apart


def test_multi30k_scores_both_models_with_the_same_beam_search_and_greedily(tmp_path, capsys):
    """Beam 4 is each model's final decoding (ours with our alpha, keras-hub's BeamSampler without one); greedy too."""
    folder = multi30k_folder(tmp_path)
    text = types.SimpleNamespace(
        sources=[f"a dog number {i} runs on the green grass ." for i in range(20)],
        targets=[f"a dog number {i} runs on the green grass ." for i in range(20)],
    )
    args = multi30k.parse_args(["--data", str(folder), "--minutes", "30"])
    for name, alpha, decoding in (("ours", 1.4, "beam 4, alpha 1.4"), ("keras-hub", None, "beam 4, log-prob")):
        asked = []

        def translator(beam_size, length_penalty=None):  # the worker's factory; its beam search is perfect here
            asked.append((beam_size, length_penalty))
            return _EchoTranslator()

        result, hypotheses, final = scoring.score_test(args, name, translator, _EchoTranslator("grass"), text)
        assert asked == [(4, alpha)]
        assert (result["decoding"], result["beam_size"], result["length_penalty"]) == (decoding, 4, alpha)
        assert result["test"]["bleu"] == 100.0 and result["test_greedy"]["bleu"] < 1
        assert hypotheses == text.targets and isinstance(final, _EchoTranslator) and final.word is None
        assert f"{name}: test_2016 BLEU 100.00, chrF 100.00 ({decoding}); greedy BLEU" in capsys.readouterr().out

    greedy_args = multi30k.parse_args(["--data", str(folder), "--minutes", "30", "--beam-size", "1"])
    greedy = _EchoTranslator()
    result, _, final = scoring.score_test(greedy_args, "keras-hub", None, greedy, text)  # no beam translator asked
    assert (result["decoding"], result["beam_size"], result["length_penalty"]) == ("greedy", 1, None)
    assert final is greedy and result["test"] == result["test_greedy"]


def test_multi30k_keras_hub_translator_decodes_with_the_peers_beam_sampler(tmp_path):
    """keras-hub's translator at beam 4 is `KerasHubTransformer.generate(num_beams=4)` around our tokenizers."""
    from keras_transformer.config import TrainConfig, preset
    from keras_transformer.data.tokenizers import END_ID, SubwordTokenizer
    from keras_transformer.data.vocabulary import learn_vocabulary, write_vocabulary

    sentences = ["ein hund läuft über die wiese", "a dog runs across the meadow", "zwei katzen schlafen"]
    write_vocabulary(learn_vocabulary(sentences, 60), tmp_path / "vocab.txt")
    tokenizer = SubwordTokenizer(str(tmp_path / "vocab.txt"))
    args = multi30k.parse_args(["--data", str(multi30k_folder(tmp_path)), "--minutes", "1", "--preset", "tiny"])
    args.max_source_len, args.max_target_len = 8, 6
    size = tokenizer.vocab_size
    model_config = preset("tiny", source_vocab_size=size, target_vocab_size=size, max_source_len=8, max_target_len=6)
    vocabularies = types.SimpleNamespace(source_tokenizer=tokenizer, target_tokenizer=tokenizer)
    model, translator = models.build_worker_model(
        args, "keras-hub", model_config, TrainConfig(preset="tiny"), vocabularies, tmp_path
    )
    beam, greedy = translator(4), translator(1)
    assert (beam.num_beams, greedy.num_beams) == (4, 1)
    with pytest.raises(ValueError, match="BeamSampler has no length penalty"):
        translator(4, 1.4)
    texts = tf.constant(sentences)
    source_ids = tokenizer.tokenize(texts)[:, :8].to_tensor()
    for translate, num_beams in ((beam, 4), (greedy, 1)):
        expected = tokenizer.detokenize(beam.hub.generate(source_ids, 6, end_id=END_ID, num_beams=num_beams))
        assert translate.translate(texts)["translation"].numpy().tolist() == expected.numpy().tolist()


@pytest.mark.slow
def test_multi30k_tiny_run_writes_both_models_beam_and_greedy_scores(tmp_path, monkeypatch):
    """The whole study on a tiny fake corpus: two workers, the JSON with both decodings of both models."""
    folder = tmp_path / "data"
    folder.mkdir()
    pairs = [
        ("ein hund läuft", "a dog runs"),
        ("zwei katzen schlafen", "two cats sleep"),
        ("ein mann isst", "a man eats"),
    ]
    for split in ("train", "val", "test_2016_flickr"):
        for side, language in enumerate(("de", "en")):
            with gzip.open(folder / f"{split}.{language}.gz", "wt", encoding="utf-8") as file:
                file.write("".join(f"{pair[side]}\n" for pair in pairs * 4))
    monkeypatch.chdir(ROOT)  # the workers run `python -m benchmarks.translation.multi30k` from here
    argv = ["--data", str(folder), "--minutes", "0.01", "--preset", "tiny", "--source-vocab-size", "80"]
    argv += ["--steps-per-epoch", "2", "--batch-size", "4", "--curve-points", "1", "--curve-sentences", "3"]
    argv += ["--test-size", "5", "--precision", "float32", "--out", str(tmp_path / "out"), "--name", "tiny"]
    argv += ["--work-dir", str(tmp_path / "work")]
    assert multi30k.main(argv) == 0
    written = json.loads((tmp_path / "out" / "tiny.json").read_text())
    assert (tmp_path / "out" / "tiny.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for name, decoding, alpha in (("ours", "beam 4, alpha 1.4", 1.4), ("keras-hub", "beam 4, log-prob", None)):
        result = written["models"][name]
        assert (result["decoding"], result["beam_size"], result["length_penalty"]) == (decoding, 4, alpha)
        for split in ("test", "test_greedy"):
            assert result[split]["sentences"] == 5 and {"bleu", "chrf"} <= set(result[split])
    comparison = written["comparison"]
    assert comparison["test_decodings"] == {"ours": "beam 4, alpha 1.4", "keras-hub": "beam 4, log-prob"}
    ours, peer = written["models"]["ours"], written["models"]["keras-hub"]
    for split in ("test", "test_greedy"):
        for metric in ("bleu", "chrf"):
            difference = round(ours[split][metric] - peer[split][metric], 2)
            assert comparison[f"{split}_{metric}_ours_minus_keras_hub"] == difference
    assert comparison["same_batches"] is True
    assert written["command"].startswith("python -m benchmarks.translation.multi30k --data ")
