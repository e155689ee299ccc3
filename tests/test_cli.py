"""The command line end to end, through subprocesses: exit codes and outputs."""

import json
import os
import subprocess
import sys

import pytest

TINY = ["--max-train-examples", "40", "--max-dev-examples", "20", "--evaluate-words", "10",
        "--embedding-dim", "8", "--units", "16", "--batch-size", "16", "--verbose", "0"]


def kerasseq(*args, timeout=600):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([sys.executable, "-m", "kerasseq.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory):
    output = str(tmp_path_factory.mktemp("cli") / "g2p")
    result = kerasseq("train", "--epochs", "2", "--output-dir", output, *TINY)
    assert result.returncode == 0, result.stderr[-2000:]
    return output


def test_train_writes_model_history_and_summary(trained_dir):
    assert os.path.exists(os.path.join(trained_dir, "model.keras"))
    with open(os.path.join(trained_dir, "summary.json")) as handle:
        summary = json.load(handle)
    assert summary["epochs"] == 2 and len(summary["history"]["loss"]) == 2
    assert 0.0 <= summary["dev"]["wer"] <= 1.0 and summary["dev"]["words"] == 10
    with open(os.path.join(trained_dir, "history.csv")) as handle:
        assert len(handle.read().strip().splitlines()) == 3  # header + 2 epochs
    assert not any(name.endswith(".tmp") or ".tmp-" in name for name in os.listdir(trained_dir))


def test_translate_arguments_and_stdin(trained_dir):
    result = kerasseq("translate", trained_dir, "cat", "dog")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["cat", "dog"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    piped = subprocess.run([sys.executable, "-m", "kerasseq.cli", "translate", trained_dir,
                            "--beam", "3", "--nbest", "2"], input="cat\n\ndog\n",
                           capture_output=True, text=True, timeout=600, env=env)
    assert piped.returncode == 0, piped.stderr[-2000:]
    rows = [line.split("\t") for line in piped.stdout.strip().splitlines()]
    assert [row[0] for row in rows] == ["cat", "dog"]
    assert all(len(row[1].split(" | ")) == 2 for row in rows)


def test_evaluate_prints_rates(trained_dir):
    result = kerasseq("evaluate", trained_dir, "--split", "dev", "--limit", "15")
    assert result.returncode == 0, result.stderr[-2000:]
    rates = json.loads(result.stdout.strip().splitlines()[-1])
    assert rates["split"] == "dev" and rates["words"] == 15 and 0 <= rates["wer"] <= 1


@pytest.mark.parametrize("args, message", [
    (["translate", "/nonexistent/model", "cat"], "no kerasseq model"),
    (["train", "--dataset", "tsv:/nonexistent.tsv", "--output-dir", "/tmp/x"], "no such file"),
    (["train", "--dataset", "wmt", "--output-dir", "/tmp/x"], "--dataset must be"),
    (["evaluate", "/nonexistent/model"], "no kerasseq model"),
])
def test_bad_arguments_exit_2_with_one_line(args, message):
    result = kerasseq(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert message in lines[-1] and lines[-1].startswith("kerasseq ")


def test_argparse_errors_are_nonzero():
    assert kerasseq("train").returncode == 2  # --output-dir missing
    assert kerasseq("train", "--epochs", "0", "--output-dir", "/tmp/x").returncode == 2


def test_not_a_kerasseq_model(tmp_path):
    bogus = tmp_path / "model.keras"
    bogus.write_text("not a zip file")
    result = kerasseq("translate", str(tmp_path), "cat")
    assert result.returncode == 2 and "not a loadable kerasseq model" in result.stderr


def test_tsv_dataset_trains(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    rows = [f"go {i}\tve {i}" for i in range(40)]
    pairs.write_text("\n".join(rows) + "\n", encoding="utf-8")
    output = str(tmp_path / "tsv_model")
    result = kerasseq("train", "--dataset", f"tsv:{pairs}", "--epochs", "1",
                      "--output-dir", output, *TINY)
    assert result.returncode == 0, result.stderr[-2000:]
    assert kerasseq("translate", output, "go 3").returncode == 0


def test_tsv_evaluate_reports_bleu_and_chrf(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"go {i}\tve {i}\n" for i in range(60)), encoding="utf-8")
    output = str(tmp_path / "tsv_bleu")
    assert kerasseq("train", "--dataset", f"tsv:{pairs}", "--epochs", "1", "--output-dir", output,
                    *TINY).returncode == 0
    result = kerasseq("evaluate", output, "--dataset", f"tsv:{pairs}", "--split", "dev")
    assert result.returncode == 0, result.stderr[-2000:]
    scores = json.loads(result.stdout.strip().splitlines()[-1])
    assert scores["sentences"] == 3 and 0 <= scores["bleu"] <= 100 and 0 <= scores["chrf"] <= 100


def test_tfds_dataset_offline_with_mock_data(tmp_path, capsys):
    import tensorflow_datasets as tfds

    from kerasseq.cli import main

    output = str(tmp_path / "tfds_model")
    dataset = "tfds:ted_hrlr_translate/pt_to_en"
    with tfds.testing.mock_data(num_examples=24, policy=tfds.testing.MockPolicy.USE_CODE):
        assert main(["train", "--dataset", dataset, "--epochs", "1", "--output-dir", output,
                     "--max-target-length", "64", *TINY]) == 0
        assert main(["evaluate", output, "--dataset", dataset, "--split", "dev",
                     "--limit", "5"]) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scores["sentences"] >= 1 and 0 <= scores["bleu"] <= 100


def test_unknown_tfds_dataset_is_one_line_error():
    result = kerasseq("train", "--dataset", "tfds:no_such_dataset_xyz", "--output-dir", "/tmp/x")
    assert result.returncode == 2
    assert "could not load" in result.stderr.strip().splitlines()[-1]
