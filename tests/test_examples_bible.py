"""Smoke runs of the Spanish → English Bible examples (tiny models, a few verses).

They need the SWORD modules (`make examples-data`: libsword-utils,
sword-text-sparv, sword-text-web) and are skipped with the reason otherwise;
the loader itself is tested everywhere in tests/data/test_sword.py.

The example's smoke run is the section "Reproduce the full run" of
docs/tutorial_bible.md: its commands, read from the page, run in order with
`--smoke` in an empty folder. The section's steps and times are recomputed
from the committed artefacts of the recorded run (docs/artefacts/bible_es_en/).
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.test_docs import DOCS, ROOT, fenced_blocks
from tests.test_examples import EXAMPLES, load_example

pytestmark = pytest.mark.slow  # the examples: `make test-all` only
TUTORIAL = DOCS / "tutorial_bible.md"
ARTEFACTS = DOCS / "artefacts" / "bible_es_en"
REPRODUCE = "## Reproduce the full run"
# The docs' figures the reproduce commands make (--figures-dir), for docs/images.
REPRODUCED_FIGURES = {"bible_learning_curves.png", "bible_attention_transformer.png",
                      "bible_attention_rnn_attention.png", "bible_attention_heads.png"}


def _modules_or_skip():
    from kerasseq.data.sword import SwordError, load_module

    if shutil.which("mod2imp") is None:
        pytest.skip("mod2imp is not installed (Debian libsword-utils; make examples-data)")
    try:
        load_module("spaRV1909eb")
        load_module("engWEB2015eb")
    except SwordError as error:
        pytest.skip(f"the SWORD Bibles are not installed (make examples-data): {error}")


def reproduce_section():
    """The text of the section "Reproduce the full run" of docs/tutorial_bible.md."""
    text = TUTORIAL.read_text(encoding="utf-8")
    assert f"\n{REPRODUCE}\n" in text, f"{TUTORIAL.name} has no section {REPRODUCE!r}"
    return text.split(f"\n{REPRODUCE}\n", 1)[1].split("\n## ", 1)[0]


def reproduce_commands():
    """The commands of the section's ```bash blocks, in order (continued lines
    joined, comments dropped)."""
    commands = []
    for info, body, _ in fenced_blocks(reproduce_section()):
        if info.split()[:1] != ["bash"]:
            continue
        for line in body.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                commands.append(" ".join(line.split()))
    return commands


def run_reproduce_commands(commands):
    """Run `commands` in the working directory: the examples in this process
    with `--smoke` added (and `--no-eflomal` without eflomal), `cp` with bash.
    The data step is checked, not run: the apt-get packages are among the
    Makefile's examples-data ones, the pip extra is setup.cfg's `align`.
    Returns `[(example, its main's result), ...]`."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    packages = set(re.search(r"^EXAMPLES_PACKAGES := (.*)$", makefile, re.M)[1].split())
    ran = []
    for command in commands:
        argv = shlex.split(command)
        if argv[:3] == ["sudo", "apt-get", "install"]:
            assert {word for word in argv[3:] if not word.startswith("-")} <= packages, command
        elif argv[:4] == [".venv/bin/python", "-m", "pip", "install"]:
            assert argv[4:] == ["-e", ".[align]"], command
            assert re.search(r"^align =\n +eflomal", (ROOT / "setup.cfg").read_text(), re.M)
        elif argv[0] == ".venv/bin/python" and argv[1].startswith("examples/"):
            name = Path(argv[1]).stem
            extra = ["--smoke"]
            if name == "bible_alignments" and not _has_eflomal():
                extra.append("--no-eflomal")
            ran.append((name, load_example(name).main([*argv[2:], *extra])))
        elif argv[0] == "cp":
            subprocess.run(["bash", "-c", command], check=True)
        else:
            pytest.fail(f"{TUTORIAL.name}, {REPRODUCE!r}: a command the test cannot run: {command}")
    return ran


def _has_eflomal():
    try:
        import eflomal  # noqa: F401
    except ImportError:
        return False
    return True


def test_spanish_to_english_bible_smoke(tmp_path, monkeypatch, capsys):
    """The commands of "Reproduce the full run", in order, on a slice: they
    write only under runs/bible until the figures step, which copies the
    pages' own figures (and no other file) into docs/images."""
    _modules_or_skip()
    docs_images = {path.name: path.read_bytes() for path in (DOCS / "images").iterdir()}
    monkeypatch.chdir(tmp_path)
    commands = reproduce_commands()
    figures_step = next(i for i, command in enumerate(commands) if command.startswith("cp "))
    ran = run_reproduce_commands(commands[:figures_step])
    assert [(name, result is None) for name, result in ran] == [
        ("spanish_to_english_bible", True), ("spanish_to_english_bible", True),
        ("spanish_to_english_bible", False), ("bible_alignments", False)]
    written = sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*")
                     if path.is_file())
    assert written and [path for path in written if not path.startswith("runs/bible/")] == []
    (tmp_path / "docs" / "images").mkdir(parents=True)
    assert run_reproduce_commands(commands[figures_step:]) == []
    copied = {path.name for path in (tmp_path / "docs" / "images").iterdir()}
    assert copied == REPRODUCED_FIGURES and copied <= set(docs_images)
    assert {path.name: path.read_bytes() for path in (DOCS / "images").iterdir()} == docs_images

    out = tmp_path / "runs" / "bible"
    for name in ("transformer", "rnn_attention"):  # the machine's speed around each fit
        speed = json.loads((out / name / "history.json").read_text())["machine"]
        assert speed["matmul_size"] == 256
        assert speed["matmul_gflops_before_fit"] > 0 and speed["matmul_gflops_after_fit"] > 0
    aligned = ran[3][1]
    assert aligned["models"] == {name: str(Path("runs/bible") / name / "model.keras")
                                 for name in ("transformer", "rnn_attention")}
    assert aligned["verses_scored"] > 0
    assert {"diagonal", "rnn_attention", "transformer (all layers and heads averaged)",
            "transformer layer 0 head 1"} <= set(aligned["scores"])
    assert (out / "alignments.md").read_text().startswith("| aligner |")

    module = load_example("spanish_to_english_bible")
    results = ran[2][1]
    assert results["test_pairs"] == 12 and results["data"]["pairs"] > 30_000
    for name in ("transformer", "rnn_attention"):
        scores = results["models"][name]
        assert 0.0 <= scores["test_bleu_greedy"] <= 100.0
        assert 0.0 <= scores["test_chrf_beam"] <= 100.0
        assert len(scores["history"]["dev_bleu"]) == 1
        assert sum(row["count"] for row in scores["test_bleu_by_length_beam"]) == 12
        assert len(scores["examples"]) == 9  # the 3 best, 3 median and 3 worst verses
        chrf = [example["chrf"] for example in scores["examples"]]
        assert chrf[0] >= chrf[3] >= chrf[-1] and chrf[:3] == sorted(chrf[:3], reverse=True)
        assert {"verse", "source", "reference", "beam", "greedy", "chrf"} <= set(
            scores["examples"][0])
        assert len(scores["history"]["fit_minutes"]) == 1
        rows = module.read_translations(out / name / "test_translations.tsv")
        assert len(rows) == 12
        assert {example["verse"] for example in scores["examples"]} <= {r["verse"] for r in rows}
        by_verse = {row["verse"]: row for row in rows}
        assert by_verse[scores["examples"][0]["verse"]]["beam"] == scores["examples"][0]["beam"]
        assert (out / name / "model.keras").exists()
        assert len(list((out / name / "checkpoints").glob("epoch_*.keras"))) == 1
    results_file = json.loads((out / "results.json").read_text())
    assert results_file["test_pairs"] == 12
    assert (out / "learning_curves.png").stat().st_size > 0
    table = (out / "translations.md").read_text()
    assert table.startswith("# Test verses of the Bible models (transformer, rnn_attention)")
    assert table.count("| reference |") == 9 and table.count("| rnn_attention, beam") == 9
    # The dev choices alone (other settings than the first evaluate's: made anew),
    # the test split untouched; then scoring one model again reuses them and keeps
    # the other model's results (runs in separate sessions).
    tested = (out / "rnn_attention" / "test_translations.tsv").stat().st_mtime_ns
    capsys.readouterr()
    chosen = module.main(["--smoke", "--phase", "dev", "--models", "rnn_attention",
                          "--output-dir", str(out), "--no-repeat-ngram-sizes", "2", "0"])
    assert "dev not decoded again" not in capsys.readouterr().out
    assert (out / "rnn_attention" / "test_translations.tsv").stat().st_mtime_ns == tested
    assert json.loads((out / "results.json").read_text()) == results_file
    saved = json.loads((out / "rnn_attention" / "dev_choices.json").read_text())
    assert saved["choices"] == chosen["rnn_attention"]
    assert saved["settings"]["no_repeat_ngram_sizes"] == [0, 2]
    again = module.main(["--smoke", "--phase", "evaluate", "--models", "rnn_attention",
                         "--output-dir", str(out), "--figures-dir", str(tmp_path / "img"),
                         "--no-repeat-ngram-sizes", "2", "0"])
    assert "dev not decoded again" in capsys.readouterr().out
    assert {key: again["models"]["rnn_attention"][key]
            for key in chosen["rnn_attention"]} == chosen["rnn_attention"]
    # the reused choices score test as a fresh evaluate does (choices decoded anew)
    (out / "rnn_attention" / "dev_choices.json").unlink()
    fresh = module.main(["--smoke", "--phase", "evaluate", "--models", "rnn_attention",
                         "--output-dir", str(out), "--no-repeat-ngram-sizes", "2", "0"])
    assert "dev not decoded again" not in capsys.readouterr().out
    def figures(record):  # every dev and test figure but the decode seconds
        return {key: value for key, value in record.items()
                if key.startswith(("test_", "dev_")) and key != "test_decode_timings"}

    assert figures(fresh["models"]["rnn_attention"]) == figures(again["models"]["rnn_attention"])
    # another training (here: other dev scores in its history) is not reused
    record_path = out / "rnn_attention" / "history.json"
    record = json.loads(record_path.read_text())
    record["history"]["dev_bleu"] = [score + 1.0 for score in record["history"]["dev_bleu"]]
    record_path.write_text(json.dumps(record))
    module.main(["--smoke", "--phase", "dev", "--models", "rnn_attention",
                 "--output-dir", str(out), "--no-repeat-ngram-sizes", "2", "0"])
    assert "dev not decoded again" not in capsys.readouterr().out
    assert list(again["models"]) == ["transformer", "rnn_attention"]
    assert again["models"]["transformer"] == results["models"]["transformer"]
    scores = again["models"]["rnn_attention"]  # the n-gram guard chosen on dev
    by_size = scores["dev_beam_by_no_repeat_ngram_size"]
    assert list(by_size) == ["0", "2"] and scores["no_repeat_ngram_size"] in (0, 2)
    assert by_size["0"]["bleu"] == scores["dev_bleu_beam_by_length_penalty"]["0.0"]
    assert by_size[str(scores["no_repeat_ngram_size"])]["bleu"] == max(
        row["bleu"] for row in by_size.values())
    repetitions = scores["test_repetitions"]
    assert repetitions["beam"]["bleu"] == scores["test_bleu_beam"]
    assert repetitions["beam_guarded"]["no_repeat_ngram_size"] == scores["no_repeat_ngram_size"]
    assert repetitions["reference"]["texts"] == repetitions["greedy"]["texts"] == 12
    assert (tmp_path / "img" / "bible_learning_curves.png").stat().st_size > 0
    # A second training into the same directory would mix checkpoints: refused.
    with pytest.raises(SystemExit, match="already holds epoch checkpoints"):
        module.main(["--smoke", "--phase", "train", "--output-dir", str(out)])


def test_spanish_to_english_bible_resume(tmp_path, capsys):
    """A training cut after 2 epochs goes on with --resume from its newest
    checkpoint: the optimizer's step count (hence the learning rate and Adam's
    state) is restored, the history grows by one row per epoch, the fit
    minutes count on, and the best epoch's weights (the early stopping's
    state) come back at the end; once nothing is left to train a resume only
    rewrites model.keras with those weights."""
    _modules_or_skip()
    import keras

    module = load_example("spanish_to_english_bible")
    out = tmp_path / "run"
    common = ["--smoke", "--phase", "train", "--models", "transformer", "--output-dir", str(out),
              "--patience", "3", "--keep-checkpoints", "3", "--verbose", "0"]
    module.main([*common, "--epochs", "2"])
    directory = out / "transformer"
    first = json.loads((directory / "history.json").read_text())
    assert first["steps"] == 6 and len(first["history"]["dev_bleu"]) == 2
    assert "segments" not in first
    capsys.readouterr()
    module.main([*common, "--epochs", "3", "--resume"])
    assert "resumed after epoch 2 (epoch_002.keras, step 6," in capsys.readouterr().out
    record = json.loads((directory / "history.json").read_text())
    assert record["steps"] == 9  # 3 more steps after the restored 6, not 3 from 0
    history = record["history"]
    assert history["dev_bleu"][:2] == first["history"]["dev_bleu"]
    assert len(history["dev_bleu"]) == len(history["loss"]) == 3
    assert history["fit_minutes"][2] > history["fit_minutes"][1] == first["history"][
        "fit_minutes"][1]
    assert [part["initial_step"] for part in record["segments"]] == [0, 6]
    assert record["resumed_after_epochs"] == [2]
    checkpoint = keras.saving.load_model(directory / "checkpoints" / "epoch_003.keras")
    assert int(checkpoint.optimizer.iterations.numpy()) == 9
    best = record["best_epoch"]
    assert best == int(np.argmax(history["dev_bleu"])) + 1
    expected = keras.saving.load_model(directory / "checkpoints" / f"epoch_{best:03d}.keras")
    trained = keras.saving.load_model(directory / "model.keras")
    for kept, weights in zip(trained.get_weights(), expected.get_weights(), strict=True):
        np.testing.assert_array_equal(kept, weights)
    module.main([*common, "--epochs", "3", "--resume"])  # nothing left: same model, same steps
    assert "nothing left to train (step 9, epoch 3)" in capsys.readouterr().out
    again = keras.saving.load_model(directory / "model.keras")
    for kept, weights in zip(again.get_weights(), expected.get_weights(), strict=True):
        np.testing.assert_array_equal(kept, weights)
    assert json.loads((directory / "history.json").read_text())["history"] == history
    with pytest.raises(SystemExit, match="pass --resume to go on from the newest one"):
        module.main([*common, "--epochs", "4"])
    with pytest.raises(SystemExit, match=r"other arguments: --label-smoothing 0\.1 \(now 0\.2\)"):
        module.main([*common, "--epochs", "4", "--resume", "--label-smoothing", "0.2"])
    assert [part["initial_epoch"] for part in json.loads(
        (directory / "segments.json").read_text())] == [0, 2, 3]


def test_reproduce_section_numbers_are_the_artefacts():
    """The recorded run's steps and times on the page, recomputed from
    docs/artefacts/bible_es_en/ (results.json, alignments.json, each model's
    history.json and train.log) and the time limit of its commands (90 min)."""
    section = " ".join(reproduce_section().split())  # line breaks as spaces
    evaluated = json.loads((ARTEFACTS / "results.json").read_text())
    alignments = json.loads((ARTEFACTS / "alignments.json").read_text())
    limit = 90.0
    expected, measured, estimated = [], 0.0, 0.0
    for name in ("transformer", "rnn_attention"):
        record = json.loads((ARTEFACTS / name / "history.json").read_text())
        assert "steps" not in record  # the recorded run predates the field: derived
        minutes = record["history"]["fit_minutes"]
        log = (ARTEFACTS / name / "train.log").read_text()
        (batches,) = {int(count) for count in re.findall(r"^(\d+)/\1 - ", log, re.M)}
        dev = [int(seconds) / 60 for seconds in re.findall(r"dev BLEU [\d.]+ \((\d+) s\)", log)]
        whole = len(minutes) - 1  # the last epoch was cut by the time limit
        assert len(dev) == len(minutes) and limit < minutes[-1] < limit + 1
        validation = minutes[-1] - limit  # what fit logged after the limit
        starts = [0.0] + [end + seconds for end, seconds in zip(minutes, dev, strict=True)]
        paces = [minutes[epoch] - starts[epoch] - validation for epoch in range(whole)]
        pace = sum(paces) / whole
        cut = limit - starts[whole]
        steps = whole * batches + round(batches * cut / pace)
        expected += [f"{whole} whole epochs", f"{whole * batches:,} steps", f"{cut:.2f}",
                     f"{pace:.2f} minutes" if name == "transformer" else f"{pace:.2f}",
                     f"{validation:.2f} minutes", f"about {round(batches * cut / pace)} batches",
                     f"{steps:,} steps", f"--max-steps {steps}", f"--epochs {whole + 1}",
                     f"{(whole + 1) * batches:,}",
                     f"{round(batches * cut / min(paces))} or {round(batches * cut / max(paces))}"]
        scores = evaluated["models"][name]
        timings = scores["test_decode_timings"]
        expected += [f"{scores['train_seconds']:,} s",
                     f"{timings['greedy_seconds']} + {timings['beam_seconds']} s",
                     f"{alignments['timings'][name + '_seconds']} s"]
        # the dev choices: 2 greedy and 2 beam passes over the dev verses, at the test speed
        dev_passes = (2 * (timings["greedy_seconds"] + timings["beam_seconds"])
                      * evaluated["dev_pairs_scored"] / evaluated["test_pairs"])
        expected.append(f"about {round(dev_passes)} s")
        measured += scores["train_seconds"] + timings["greedy_seconds"] + timings["beam_seconds"]
        measured += alignments["timings"][name + "_seconds"]
        estimated += dev_passes
    assert (evaluated["dev_pairs_scored"], evaluated["test_pairs"]) == (1482, 1576)
    measured += alignments["timings"]["eflomal_seconds"]
    expected += [f"{alignments['timings']['eflomal_seconds']} s",
                 f"{alignments['timings']['transformer_guided_seconds']} s more",
                 f"{measured:,.1f} s", "({} h {} min)".format(*divmod(round(measured / 60), 60)),
                 "about {} h {} min".format(*divmod(round((measured + estimated) / 60), 60))]
    missing = [text for text in expected if text not in section]
    assert not missing, f"{REPRODUCE!r} lacks (or has other numbers than) {missing}"


def test_bible_alignments_model_paths_and_figure_names(tmp_path):
    module = load_example("bible_alignments")
    folder = tmp_path / "transformer"
    folder.mkdir()
    with pytest.raises(SystemExit, match="without averaged.keras or model.keras"):
        module.model_path(str(folder))
    (folder / "model.keras").write_bytes(b"")
    assert module.model_path(str(folder)) == str(folder / "model.keras")
    (folder / "averaged.keras").write_bytes(b"")  # the evaluate phase kept the average
    assert module.model_path(str(folder)) == str(folder / "averaged.keras")
    assert module.model_path(str(folder / "model.keras")) == str(folder / "model.keras")
    assert [module.heads_figure_name(name) for name in
            ("transformer", "transformer_guided", "big")] == [
        "bible_attention_heads.png", "bible_attention_heads_guided.png",
        "bible_attention_heads_big.png"]


def test_bible_alignments_smoke(tmp_path):
    _modules_or_skip()
    pytest.importorskip("eflomal", reason="eflomal is not installed (pip install -e '.[dev]')")
    module = load_example("bible_alignments")
    results = module.main(["--smoke", "--output-dir", str(tmp_path)])
    scores = results["scores"]
    assert results["verses_scored"] > 0
    assert {"diagonal", "eflomal reverse", "eflomal grow-diag-final-and", "eflomal union",
            "eflomal intersection", "transformer layer 1 head 0",
            "transformer (last layer, heads averaged)"} <= set(scores)
    # the average of every head read both ways; each single head by target word only
    average = "transformer (all layers and heads averaged)"
    assert {f"{average} [{method}]" for method in
            ("source", "intersection", "union", "grow-diag-final-and")} <= set(scores)
    assert "transformer layer 1 head 0 [source]" not in scores
    # an intersection's links are the two directions' common links: never more
    assert (scores[f"{average} [intersection]"]["predicted"]
            <= min(scores[average]["predicted"], scores[f"{average} [source]"]["predicted"])
            <= scores[f"{average} [union]"]["predicted"])
    assert (scores["eflomal intersection"]["predicted"] <= scores["eflomal forward"]["predicted"]
            <= scores["eflomal union"]["predicted"])
    assert results["best"]["transformer"]["best_eflomal"].startswith("eflomal ")
    for values in scores.values():
        assert 0.0 <= values["aer"] <= 1.0 and 0.0 <= values["hit_rate"] <= 1.0
    # eflomal learns something even from 324 verses; the diagonal is a weak baseline
    assert scores["eflomal grow-diag-final-and"]["f1"] > scores["diagonal"]["f1"]
    assert (tmp_path / "alignments.md").read_text().startswith("| aligner |")
    assert list(tmp_path.glob("alignment_transformer_*_heads.png"))
    assert results["best"]["transformer"]["aligner"].startswith("transformer")
    # The saved model, loaded in a fresh process the way the full run loads a trained
    # one (`keras.models.load_model` after kerasseq's import, nothing registered by hand).
    fresh = tmp_path / "fresh"
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "bible_alignments.py"), "--no-eflomal",
         "--max-verses", "24", "--model", f"transformer={tmp_path / 'smoke_transformer.keras'}",
         "--output-dir", str(fresh), "--figures-dir", str(fresh / "images")],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    again = json.loads((fresh / "alignments.json").read_text())
    assert again["scores"]["transformer (last layer, heads averaged)"] == scores[
        "transformer (last layer, heads averaged)"]
    assert {path.name for path in (fresh / "images").iterdir()} == {
        "bible_attention_transformer.png", "bible_attention_heads.png"}


def test_guided_transformer_smoke(tmp_path):
    _modules_or_skip()
    pytest.importorskip("eflomal", reason="eflomal is not installed (pip install -e '.[align]')")
    module = load_example("spanish_to_english_bible")
    results = module.main(["--smoke", "--models", "transformer_guided", "--output-dir",
                           str(tmp_path)])
    history = results["models"]["transformer_guided"]["history"]
    assert np.isfinite(history["alignment_loss"]).all() and history["alignment_loss"][0] > 0
    with np.load(tmp_path / "reference_links.npz") as cached:
        assert cached["counts"].shape == (400,) and cached["counts"].sum() > 400
    # The alignment study scores the guided head, the translator's default for this model.
    aligned = load_example("bible_alignments").main([
        "--no-eflomal", "--max-verses", "12", "--output-dir", str(tmp_path / "aligned"),
        "--model", f"transformer_guided={tmp_path / 'transformer_guided' / 'model.keras'}"])
    assert {"transformer_guided (guided head: layer 0 head 0)",
            "transformer_guided (guided head: layer 0 head 0) [grow-diag-final-and]"} <= set(
        aligned["scores"])


def test_bible_alignment_head_smoke(tmp_path):
    """examples/bible_alignment_head.py trains and saves a head over a tiny model;
    bible_alignments.py --alignment-head scores it read the five ways."""
    _modules_or_skip()
    pytest.importorskip("eflomal", reason="eflomal is not installed (pip install -e '.[align]')")
    import keras

    from kerasseq.alignment import ShiftedAlignmentHead

    record = load_example("bible_alignment_head").main(["--smoke", "--output-dir",
                                                        str(tmp_path)])
    assert record["training_verses"] == 300 and record["piece_links"] > 300
    assert len(record["losses"]) == 1 and np.isfinite(record["losses"][0])
    assert json.loads((tmp_path / "alignment_head.json").read_text())["losses"] == record["losses"]
    head = keras.models.load_model(record["head"])
    assert isinstance(head, ShiftedAlignmentHead) and (head.layer, head.shift) == (0, 1)
    aligned = load_example("bible_alignments").main([
        "--no-eflomal", "--max-verses", "12", "--output-dir", str(tmp_path / "aligned"),
        "--model", f"tiny={record['model']}", "--alignment-head", f"tiny={record['head']}"])
    shifted = "tiny (shifted head: layer 0, shift 1)"
    assert {shifted} | {f"{shifted} [{method}]" for method in (
        "source", "intersection", "union", "grow-diag-final-and")} <= set(aligned["scores"])
    with pytest.raises(SystemExit, match="NAME a --model name"):
        load_example("bible_alignments").main([
            "--no-eflomal", "--max-verses", "2", "--output-dir", str(tmp_path / "bad"),
            "--model", f"tiny={record['model']}", "--alignment-head", f"other={record['head']}"])


def test_missing_modules_exit_cleanly(tmp_path, capsys, monkeypatch):
    module = load_example("spanish_to_english_bible")
    monkeypatch.setattr(module, "load_bible_pairs", _raise_sword_error)
    assert module.main(["--smoke", "--output-dir", str(tmp_path)]) is None
    assert "sword-text-sparv" in capsys.readouterr().out


def _raise_sword_error(*args, **kwargs):
    from kerasseq.data.sword import SwordError

    raise SwordError("SWORD module 'spaRV1909eb' is not installed; install the Debian package "
                     "sword-text-sparv")


def test_bible_training_set_trains_on_few_shapes():
    """The example's training batches (every training verse, batch 64,
    bucket_boundaries="auto", at most 100 pieces a side): at most 12 batch
    shapes an epoch, so Keras' fit compiles at most 12 XLA programs on a GPU.
    The WordPiece vocabularies are learned on 3,000 verses (as the tutorial
    page does; learning them on all verses takes about a minute), which
    splits the other verses into a few more pieces than the example's."""
    _modules_or_skip()
    from kerasseq.data import batch_shapes, make_dataset

    module = load_example("spanish_to_english_bible")
    args = module.make_parser().parse_args([])
    splits, _ = module.load_data(args)
    train = splits["train"]
    assert len(train) > 25_000
    tokenizers = module.make_tokenizers(train[:3000], args.source_vocabulary_size,
                                        args.target_vocabulary_size)
    data = make_dataset([(p.source, p.target) for p in train], *tokenizers,
                        batch_size=args.batch_size, seed=args.seed, bucket_boundaries="auto",
                        max_source_length=args.max_pieces, max_target_length=args.max_pieces)
    shapes = batch_shapes(data)
    assert len(shapes) <= 12, shapes
    assert {rows for (rows, _), *_ in shapes} == {args.batch_size}
    assert sum(shapes.values()) == int(data.cardinality())
