"""Smoke runs of the Spanish → English Bible examples (tiny models, a few verses).

They need the SWORD modules (`make examples-data`: libsword-utils,
sword-text-sparv, sword-text-web) and are skipped with the reason otherwise;
the loader itself is tested everywhere in tests/data/test_sword.py.
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.test_examples import EXAMPLES, load_example


def _modules_or_skip():
    from kerasseq.data.sword import SwordError, load_module

    if shutil.which("mod2imp") is None:
        pytest.skip("mod2imp is not installed (Debian libsword-utils; make examples-data)")
    try:
        load_module("spaRV1909eb")
        load_module("engWEB2015eb")
    except SwordError as error:
        pytest.skip(f"the SWORD Bibles are not installed (make examples-data): {error}")


def test_spanish_to_english_bible_smoke(tmp_path):
    _modules_or_skip()
    module = load_example("spanish_to_english_bible")
    results = module.main(["--smoke", "--output-dir", str(tmp_path)])
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
        rows = module.read_translations(tmp_path / name / "test_translations.tsv")
        assert len(rows) == 12
        assert {example["verse"] for example in scores["examples"]} <= {r["verse"] for r in rows}
        by_verse = {row["verse"]: row for row in rows}
        assert by_verse[scores["examples"][0]["verse"]]["beam"] == scores["examples"][0]["beam"]
        assert (tmp_path / name / "model.keras").exists()
        assert len(list((tmp_path / name / "checkpoints").glob("epoch_*.keras"))) == 1
    assert json.loads((tmp_path / "results.json").read_text())["test_pairs"] == 12
    assert (tmp_path / "learning_curves.png").stat().st_size > 0
    table = (tmp_path / "translations.md").read_text()
    assert table.count("| reference |") == 9 and table.count("| rnn_attention, beam") == 9
    # Scoring one model again keeps the other one's results (runs in separate sessions).
    again = module.main(["--smoke", "--phase", "evaluate", "--models", "rnn_attention",
                         "--output-dir", str(tmp_path), "--figures-dir", str(tmp_path / "img"),
                         "--no-repeat-ngram-sizes", "2", "0"])
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
        module.main(["--smoke", "--phase", "train", "--output-dir", str(tmp_path)])


def test_bible_alignments_smoke(tmp_path):
    _modules_or_skip()
    pytest.importorskip("eflomal", reason="eflomal is not installed (pip install -e '.[dev]')")
    module = load_example("bible_alignments")
    results = module.main(["--smoke", "--output-dir", str(tmp_path)])
    scores = results["scores"]
    assert results["verses_scored"] > 0
    assert {"diagonal", "eflomal reverse", "eflomal grow-diag-final-and",
            "transformer layer 1 head 0", "transformer (last layer, heads averaged)"} <= set(scores)
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
    assert "transformer_guided (guided head: layer 0 head 0)" in aligned["scores"]


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
