"""The G2P examples run (smoke runs on tiny data): examples/g2p_cmudict.py and
examples/g2p_search_table.py. (Split from tests/test_examples.py so that the
two test workers share the example smoke runs evenly.)"""

import json
import os

import keras
import pytest

from tests.test_examples import load_example

pytestmark = pytest.mark.slow  # the examples: `make test-all` only


def test_g2p_cmudict_transformer_smoke(tmp_path):
    module = load_example("g2p_cmudict")
    if module.build_transformer_seq2seq is None:
        pytest.skip("kerasseq.models.build_transformer_seq2seq is not available")
    results = module.main(["--smoke", "--model", "transformer", "--evaluate-test",
                           "--ema-momentum", "0.9", "--tune-length-penalty", "0.5", "1.0",
                           "--output-dir", str(tmp_path)])
    assert results["model"] == "transformer"
    assert results["test"]["greedy"]["words"] == 32  # the smoke run scores 32 test words
    tuning = results["dev_length_penalty_tuning"]
    assert set(tuning) == {"0.0", "0.5", "1.0"}
    best = min(tuning.values(), key=lambda rates: (rates["wer"], rates["per"]))
    assert results["dev"]["beam2"] == best
    assert str(results["length_penalty"]) in tuning
    assert results["final_dev_loss"] is not None  # the averaged weights were scored


def test_g2p_cmudict_smoke_averages_the_last_checkpoints(tmp_path):
    # The smoke run, with the last two epochs averaged (the run without
    # averaging is the same code up to the average: its scores are
    # `dev_before_averaging`).
    results = load_example("g2p_cmudict").main(["--smoke", "--average-last", "2",
                                                "--output-dir", str(tmp_path)])
    assert results["train_pairs"] == 512
    for scores in [*results["dev"].values(), *results["dev_before_averaging"].values()]:
        assert scores["words"] == 32
        assert 0.0 <= scores["wer"] <= 1.0 and scores["per"] >= 0.0
    assert results["parameters"] > 0
    assert (tmp_path / "model.keras").exists() and (tmp_path / "history.csv").exists()
    assert json.loads((tmp_path / "results.json").read_text())["dev"] == results["dev"]
    assert results["averaged_checkpoints"] == ["epoch_001.keras", "epoch_002.keras"]
    assert set(results["dev_before_averaging"]) == set(results["dev"]) == {"greedy", "beam2"}
    assert (tmp_path / "averaged.keras").exists()
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["epoch_001.keras", "epoch_002.keras"]
    # averaged.keras reloads as the element-wise mean of the two epochs' weights
    # (computed here with NumPy) and decodes alone and inside an Ensemble.
    import numpy as np

    from kerasseq.models import Ensemble

    first, second = (keras.models.load_model(tmp_path / "checkpoints" / name, compile=False)
                     for name in ("epoch_001.keras", "epoch_002.keras"))
    averaged = keras.models.load_model(tmp_path / "averaged.keras", compile=False)
    moved = 0.0
    for a, b, mean in zip(first.weights, second.weights, averaged.weights, strict=True):
        a, b, mean = (np.asarray(w.numpy(), "float64") for w in (a, b, mean))
        if np.issubdtype(mean.dtype, np.floating):
            np.testing.assert_allclose(mean, (a + b) / 2, rtol=1e-6, atol=1e-7)
            moved = max(moved, float(np.max(np.abs(a - b))))
    assert moved > 0.0  # the two epochs differ, so the mean is not either of them
    words = ["cat", "dog"]
    assert len(averaged.translate(words, method="greedy")) == 2
    assert len(Ensemble([averaged, second]).translate(words, method="greedy")) == 2
    # A second run into the same directory would mix the old checkpoints into
    # its average: refused before training, with the reason.
    with pytest.raises(SystemExit) as error:
        load_example("g2p_cmudict").main(["--smoke", "--average-last", "2",
                                          "--output-dir", str(tmp_path)])
    assert error.value.code == 2


def test_g2p_search_table_on_tiny_models(tmp_path, capsys):
    from kerasseq.data import load_cmudict_tokenizers
    from kerasseq.models import build_rnn_seq2seq

    words, phonemes = load_cmudict_tokenizers()
    paths = []
    for seed in (1, 2):
        keras.utils.set_random_seed(seed)
        model = build_rnn_seq2seq(embedding_dim=8, units=8, max_target_length=6,
                                  source_tokenizer=words, target_tokenizer=phonemes)
        paths.append(str(tmp_path / f"run{seed}" / "model.keras"))
        os.makedirs(os.path.dirname(paths[-1]))
        model.save(paths[-1])
    output = tmp_path / "table.json"
    rows = load_example("g2p_search_table").main([
        "--model", paths[0], "--model", paths[1], "--dev-words", "6", "--beams", "1", "2",
        "--length-penalties", "0", "1", "--single-models", "--output", str(output)])
    # systems: model 1, ensemble of 2, model 2; settings: greedy, beam 2 x 2 alphas
    assert [(row["system"], row["beam"], row["length_penalty"]) for row in rows][:4] == [
        ("run1/model.keras", 1, None), ("run1/model.keras", 2, 0.0),
        ("run1/model.keras", 2, 1.0), ("ensemble of 2 (run1/model.keras, run2/model.keras)", 1, None)]
    assert len(rows) == 9 and {row["members"] for row in rows} == {1, 2}
    assert all(0.0 <= row["wer"] <= 1.0 and row["words"] == 6 for row in rows)
    assert json.loads(output.read_text())["rows"] == rows
    assert "| system | beam | length penalty | dev WER |" in capsys.readouterr().out
