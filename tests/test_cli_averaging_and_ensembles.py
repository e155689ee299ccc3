"""`kerasseq train --keep-checkpoints`, `kerasseq average` and ensembles in the CLI.

The commands run in this process through `kerasseq_cli.main` (the parser
and the handlers of the console script); `tests/test_cli.py` covers the
console entry point itself in subprocesses.
"""

import json
import os

import keras
import numpy as np
import pytest

from kerasseq.data import TextTokenizer
from kerasseq.models import Ensemble, build_rnn_seq2seq
from kerasseq.training import average_checkpoints
from kerasseq_cli import main
from tests.test_cli import TINY, trained_run

WORDS = ["cat", "dog", "tree"]


def _error_line(capsys):
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("kerasseq")]
    assert len(lines) == 1, lines
    return lines[0]


def _printed_translations(capsys):
    out = capsys.readouterr().out
    return [line.split("\t")[1] for line in out.splitlines() if "\t" in line]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    output = str(tmp_path_factory.mktemp("cli_average") / "g2p")
    # "--evaluate-words 0" after TINY (which holds "--evaluate-words 10"): the last
    # one counts, and no test reads the greedy check of the dev words after training.
    assert main(["train", "--epochs", "3", "--learning-rate", "1e-2", "--keep-checkpoints", "2",
                 "--output-dir", output, *TINY, "--evaluate-words", "0"]) == 0
    return output


@pytest.fixture(scope="module")
def model_run_dir():
    """test_cli.py's run (no epoch checkpoints), for the tests that read only its
    model.keras (the refusals)."""
    output = trained_run()
    assert not os.path.exists(os.path.join(output, "checkpoints"))
    return output


def test_train_keeps_the_last_epoch_checkpoints(run_dir):
    names = sorted(os.listdir(os.path.join(run_dir, "checkpoints")))
    assert names == ["epoch_002.keras", "epoch_003.keras"]
    last = keras.models.load_model(os.path.join(run_dir, "checkpoints", "epoch_003.keras"))
    final = keras.models.load_model(os.path.join(run_dir, "model.keras"))
    for ours, theirs in zip(last.weights, final.weights, strict=True):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(ours),
                                      keras.ops.convert_to_numpy(theirs))


def test_average_a_run_directory(run_dir, tmp_path, capsys):
    output = str(tmp_path / "averaged.keras")
    assert main(["average", output, run_dir]) == 0
    printed = capsys.readouterr().out
    assert "averaged 2 checkpoint(s)" in printed and "epoch_003.keras" in printed
    checkpoints = [os.path.join(run_dir, "checkpoints", f"epoch_00{i}.keras") for i in (2, 3)]
    expected = average_checkpoints(checkpoints)
    averaged = keras.models.load_model(output)
    for ours, theirs in zip(averaged.weights, expected.weights, strict=True):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(ours),
                                      keras.ops.convert_to_numpy(theirs))
    # An existing OUTPUT needs --overwrite; --last takes the newest N.
    assert main(["average", output, *checkpoints]) == 2
    assert "already exists; pass --overwrite" in _error_line(capsys)
    assert main(["average", output, *checkpoints, "--last", "1", "--overwrite"]) == 0
    assert "averaged 1 checkpoint(s)" in capsys.readouterr().out


def test_average_errors_are_one_line(model_run_dir, tmp_path, capsys):
    run_dir = model_run_dir
    assert main(["average", str(tmp_path / "a.keras"), str(tmp_path / "missing.keras")]) == 2
    assert "no checkpoint at" in _error_line(capsys)
    assert main(["average", str(tmp_path / "a.keras"), str(tmp_path)]) == 2
    assert "holds no epoch_XXX.keras checkpoints" in _error_line(capsys)
    assert main(["average", str(tmp_path / "a.txt"), run_dir]) == 2
    assert "OUTPUT must be a .keras file" in _error_line(capsys)
    other = build_rnn_seq2seq(source_vocab_size=12, target_vocab_size=12, embedding_dim=8,
                              units=16)
    other.save(str(tmp_path / "other.keras"))
    assert main(["average", str(tmp_path / "a.keras"), os.path.join(run_dir, "model.keras"),
                 str(tmp_path / "other.keras")]) == 2
    assert "share one architecture" in _error_line(capsys)


@pytest.mark.slow
def test_translate_evaluate_and_export_an_ensemble(run_dir, tmp_path, capsys):
    members = [os.path.join(run_dir, "model.keras"),
               os.path.join(run_dir, "checkpoints", "epoch_002.keras")]
    ensemble = Ensemble([keras.models.load_model(path) for path in members])
    expected = ensemble.translate(WORDS)
    assert main(["translate", ",".join(members), *WORDS]) == 0
    assert _printed_translations(capsys) == expected
    assert main(["evaluate", ",".join(members), "--limit", "5", "--beam", "1"]) == 0
    assert '"wer"' in capsys.readouterr().out
    export_dir = str(tmp_path / "ensemble_export")
    assert main(["export", ",".join(members), export_dir]) == 0
    with open(os.path.join(export_dir, "assets.extra", "kerasseq_export.json")) as handle:
        assert json.load(handle)["model_class"] == "Ensemble"
    capsys.readouterr()
    assert main(["translate", export_dir, *WORDS]) == 0
    assert _printed_translations(capsys) == expected
    # The single-model usage is unchanged.
    assert main(["translate", run_dir, *WORDS]) == 0
    single = keras.models.load_model(members[0]).translate(WORDS)
    assert _printed_translations(capsys) == single


def test_ensemble_of_other_vocabularies_is_a_one_line_error(model_run_dir, tmp_path, capsys):
    run_dir = model_run_dir
    source = TextTokenizer.from_texts(["abc"], split="character")
    target = TextTokenizer.from_texts(["A B C D E"], split="whitespace")
    build_rnn_seq2seq(embedding_dim=8, units=16, source_tokenizer=source,
                      target_tokenizer=target).save(str(tmp_path / "other.keras"))
    assert main(["translate", f"{run_dir},{tmp_path / 'other.keras'}", "cat"]) == 2
    line = _error_line(capsys)
    assert line.startswith("kerasseq translate: error: cannot ensemble") and "vocabulary" in line
