"""`kerasseq train` killed mid-epoch resumes from its last finished epoch.

The training process runs with the hidden testing aids `--slow-batches`, which
reports every finished batch on stderr, and `--stop-after-batch 2:0`, which
stops the process (SIGSTOP) after batch 0 of epoch index 2, so the test
SIGKILLs it at that known point (two epochs finished and backed up, the third
under way) however long it takes to read the line.
"""

import csv
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from kerasseq.training.checkpoints import read_history, truncate_history
from tests import processes

TINY = ["--max-train-examples", "40", "--max-dev-examples", "20", "--evaluate-words", "0",
        "--embedding-dim", "8", "--units", "16", "--batch-size", "16", "--verbose", "0",
        "--slow-batches", "0.2"]
KILL_AT = "kerasseq-debug: epoch 2 batch 0 done"
# The process stops itself after printing KILL_AT: the kill lands there even when
# a loaded machine lets the test read the line late (with the sleep of
# --slow-batches alone, a late read let epoch 2 finish before the kill).
STOP_AT = ["--stop-after-batch", "2:0"]
# Minutes for a training run to end: a few seconds on an idle machine, but the
# test must not fail because a loaded machine made it slow.
RUN_TIMEOUT = 900


def _command(output_dir):
    return [sys.executable, "-m", "kerasseq_cli", "train", "--epochs", "4",
            "--output-dir", output_dir, *TINY]


def history_path(output_dir):
    return os.path.join(output_dir, "history.csv")


def _env():
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _epochs(path):
    with open(path, newline="") as handle:
        return [int(row["epoch"]) for row in csv.DictReader(handle)]


def _debug_epochs(stderr):
    return sorted({int(line.split()[2]) for line in stderr.splitlines()
                   if line.startswith("kerasseq-debug: epoch")})


def _run_until_killed(command, timeout=RUN_TIMEOUT):
    """Start `command`, SIGKILL it when it prints KILL_AT; return its stderr lines."""
    process = processes.popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env=_env())
    watchdog = threading.Timer(timeout, process.kill)
    watchdog.start()
    lines = []
    try:
        for line in process.stderr:
            lines.append(line.rstrip("\n"))
            if line.startswith(KILL_AT):
                process.send_signal(signal.SIGKILL)
                break
    finally:
        watchdog.cancel()
        process.wait()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL, "\n".join(lines[-30:])
    assert lines[-1].startswith(KILL_AT)
    return lines


def _main(output_dir, *extra):
    """The command of `_command`, run by `kerasseq_cli.main` in this process (for
    runs that train nothing: a TensorFlow import each saved)."""
    from kerasseq_cli import main

    return main([*_command(output_dir)[3:], *extra])


@pytest.mark.slow
def test_killed_training_resumes_from_last_finished_epoch(tmp_path, capsys):
    output = str(tmp_path / "run")
    _run_until_killed([*_command(output), *STOP_AT])

    # The kill left two finished epochs: backed up, logged, best model saved.
    with open(os.path.join(output, "backup", "training_metadata.json")) as handle:
        assert json.load(handle)["epoch"] == 2
    assert _epochs(os.path.join(output, "history.csv")) == [0, 1]
    assert os.path.exists(os.path.join(output, "best.keras"))
    assert not os.path.exists(os.path.join(output, "model.keras"))
    with open(os.path.join(output, "tokenizers.json")) as handle:
        first_tokenizers = json.load(handle)

    # Resuming with other data (hence other vocabularies) is refused, in one line.
    other = tmp_path / "other.tsv"
    other.write_text("".join(f"xyz {i}\tqrs {i}\n" for i in range(40)), encoding="utf-8")
    capsys.readouterr()
    assert _main(output, "--dataset", f"tsv:{other}") == 2
    assert "different source vocabulary" in capsys.readouterr().err.strip().splitlines()[-1]

    resumed = processes.run(_command(output), capture_output=True, text=True, timeout=RUN_TIMEOUT,
                             env=_env())
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _debug_epochs(resumed.stderr) == [2, 3]  # resumed at epoch index 2, none repeated

    assert _epochs(os.path.join(output, "history.csv")) == [0, 1, 2, 3]
    with open(os.path.join(output, "summary.json")) as handle:
        summary = json.load(handle)
    assert summary["initial_epoch"] == 2 and summary["epochs_run"] == 2
    assert len(summary["history"]["loss"]) == 4 and len(summary["history"]["val_loss"]) == 4
    assert not any(".tmp-" in name for name in os.listdir(output))
    with open(os.path.join(output, "backup", "training_metadata.json")) as handle:
        assert json.load(handle)["epoch"] == 4  # kept: a longer run continues from it

    # The same command on the finished run: nothing happens, nothing is touched.
    model_path = os.path.join(output, "model.keras")
    model_bytes, history_text = open(model_path, "rb").read(), open(history_path(output)).read()
    capsys.readouterr()
    assert _main(output) == 0
    again = capsys.readouterr()
    assert "the run is complete (4 epochs); nothing to do" in again.out
    assert _debug_epochs(again.err) == []
    assert open(model_path, "rb").read() == model_bytes
    assert open(history_path(output)).read() == history_text

    # A larger --epochs continues from the finished model and optimizer state.
    longer = processes.run([*_command(output), "--epochs", "5"],
                            capture_output=True, text=True, timeout=RUN_TIMEOUT, env=_env())
    assert longer.returncode == 0, longer.stderr[-3000:]
    assert _debug_epochs(longer.stderr) == [4]  # only the new epoch runs
    assert _epochs(history_path(output)) == [0, 1, 2, 3, 4]
    assert open(history_path(output)).read().startswith(history_text)  # appended
    with open(os.path.join(output, "summary.json")) as handle:
        summary = json.load(handle)
    assert summary["initial_epoch"] == 4 and summary["epochs_run"] == 1
    assert len(summary["history"]["loss"]) == 5

    from kerasseq.data import learn_tokenizers, load_pairs
    from kerasseq_cli.commands import load_model

    with open(os.path.join(output, "tokenizers.json")) as handle:
        assert json.load(handle) == first_tokenizers
    model = load_model(os.path.join(output, "model.keras"))
    rebuilt = learn_tokenizers("cmudict", load_pairs("cmudict", "train", 40)[0])
    for tokenizer, config, fresh in zip((model.source_tokenizer, model.target_tokenizer),
                                        first_tokenizers, rebuilt, strict=True):
        assert tokenizer.get_vocabulary() == fresh.get_vocabulary()
        assert tokenizer.vocabulary == config["config"]["vocabulary"]
    assert hasattr(load_model(os.path.join(output, "best.keras")), "decode_step")


def test_truncate_history_keeps_one_row_per_finished_epoch(tmp_path):
    path = str(tmp_path / "history.csv")
    with open(path, "w") as handle:
        handle.write("epoch,loss,val_loss\n0,3.0,2.5\n1,2.0,2.2\n1,1.9,2.1\n2,1.5,2.0\n3,1.")
    truncate_history(path, 2)
    assert read_history(path) == {"epoch": [0, 1], "loss": [3.0, 1.9], "val_loss": [2.5, 2.1]}
    truncate_history(path, 0)
    assert not os.path.exists(path)


@pytest.mark.parametrize("argv", [["--strategy", "tpu"], ["--slow-batches", "x"],
                                  ["--stop-after-batch", "1"], ["--stop-after-batch", "1:-1"]])
def test_bad_training_options_are_argparse_errors(argv):
    from kerasseq_cli import make_parser

    with pytest.raises(SystemExit) as raised:
        make_parser().parse_args(["train", "--output-dir", "/tmp/x", *argv])
    assert raised.value.code == 2


def test_slow_batches_is_hidden_and_strategy_documented():
    from kerasseq_cli import make_parser

    commands = make_parser()._subparsers._group_actions[0].choices
    text = commands["train"].format_help()
    assert "--strategy" in text and "--slow-batches" not in text
    assert "--stop-after-batch" not in text
    args = make_parser().parse_args(["train", "--output-dir", "/tmp/x"])
    assert args.strategy == "default" and args.slow_batches == 0.0 and args.stop_after_batch is None
    args = make_parser().parse_args(["train", "--output-dir", "/tmp/x", "--stop-after-batch", "2:0"])
    assert args.stop_after_batch == (2, 0)
