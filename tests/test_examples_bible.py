"""Smoke runs of the Spanish → English Bible examples (tiny models, a few verses).

They need the SWORD modules (`make examples-data`: libsword-utils,
sword-text-sparv, sword-text-web) and are skipped with the reason otherwise;
the loader itself is tested everywhere in tests/data/test_sword.py.
"""

import json
import shutil

import pytest

from tests.test_examples import load_example


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
        assert len(scores["examples"]) == 12  # best, median and worst overlap on 12 verses
        assert {"verse", "source", "reference", "beam", "greedy", "chrf"} <= set(
            scores["examples"][0])
        assert (tmp_path / name / "model.keras").exists()
        assert len(list((tmp_path / name / "checkpoints").glob("epoch_*.keras"))) == 1
    assert json.loads((tmp_path / "results.json").read_text())["test_pairs"] == 12
    assert (tmp_path / "learning_curves.png").stat().st_size > 0
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
    assert list(tmp_path.glob("alignment_transformer_*.png"))


def test_missing_modules_exit_cleanly(tmp_path, capsys, monkeypatch):
    module = load_example("spanish_to_english_bible")
    monkeypatch.setattr(module, "load_bible_pairs", _raise_sword_error)
    assert module.main(["--smoke", "--output-dir", str(tmp_path)]) is None
    assert "sword-text-sparv" in capsys.readouterr().out


def _raise_sword_error(*args, **kwargs):
    from kerasseq.data.sword import SwordError

    raise SwordError("SWORD module 'spaRV1909eb' is not installed; install the Debian package "
                     "sword-text-sparv")
