"""kerasseq._files: one naming scheme for every atomic write, and the
leftovers of killed writers removed by the next write to the same path.

(The directory writer's renames and SIGKILL cases are tested with the export
that uses it, in tests/test_export.py.)"""

import os
import subprocess
import sys

from kerasseq._files import (
    replace_atomically,
    stale_siblings,
    temporary_path,
    write_text_atomically,
)

TOKEN = "0123456789ab"


def exited_process_id():
    process = subprocess.Popen([sys.executable, "-I", "-S", "-c", ""])
    process.wait()
    return process.pid


def test_temporary_names_follow_the_one_scheme(tmp_path):
    first = temporary_path(tmp_path / "model.keras", ".keras")
    second = temporary_path(tmp_path / "model.keras", ".keras")
    name = os.path.basename(first)
    assert name.startswith(f".model.keras.tmp-{os.getpid()}-") and name.endswith(".keras")
    assert first != second  # a fresh token each time
    assert os.path.dirname(first) == str(tmp_path)


def test_file_write_removes_dead_writers_leftovers_only(tmp_path):
    dead = exited_process_id()
    running = subprocess.Popen([sys.executable, "-I", "-S", "-c", "import time; time.sleep(300)"])
    stale = [f".history.csv.tmp-{dead}-{TOKEN}", f".history.csv.tmp-{dead}-{TOKEN}.csv"]
    kept = [f".history.csv.tmp-{running.pid}-{TOKEN}",  # a writer still running
            f".summary.json.tmp-{dead}-{TOKEN}",  # another path's
            f".history.csv.tmp-{dead}-not-a-token"]
    try:
        for name in stale + kept:
            (tmp_path / name).write_text("partial")
        assert stale_siblings(tmp_path / "history.csv")["tmp"] == sorted(
            str(tmp_path / name) for name in stale)
        write_text_atomically(tmp_path / "history.csv", "epoch\n0\n")
        assert (tmp_path / "history.csv").read_text() == "epoch\n0\n"
        assert sorted(os.listdir(tmp_path)) == sorted(["history.csv", *kept])
    finally:
        running.kill()
        running.wait()


def test_failed_file_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "notes.txt"
    write_text_atomically(path, "old")

    def failing(temporary):
        with open(temporary, "w") as handle:
            handle.write("half")
        raise OSError("disk full")

    try:
        replace_atomically(failing, path)
    except OSError as error:
        assert "disk full" in str(error)
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["notes.txt"]


def test_checkpoint_staging_uses_the_scheme_and_removes_a_killed_runs(tmp_path):
    from kerasseq.training.checkpoints import AtomicModelCheckpoint

    dead = exited_process_id()
    stale = tmp_path / f".checkpoint.tmp-{dead}-{TOKEN}"
    stale.mkdir()
    (stale / "epoch_1.weights.h5").write_text("partial")
    callback = AtomicModelCheckpoint(str(tmp_path / "epoch_{epoch}.weights.h5"),
                                     save_weights_only=True)
    assert not stale.exists()
    assert os.path.basename(callback._staging_dir).startswith(f".checkpoint.tmp-{os.getpid()}-")


def test_read_format_json_returns_only_an_object_of_the_format(tmp_path):
    from kerasseq._files import read_format_json

    path = tmp_path / "meta.json"
    assert read_format_json(path, "kerasseq-translator") is None  # missing
    path.write_text("{not json", encoding="utf-8")
    assert read_format_json(path, "kerasseq-translator") is None
    path.write_text('["format", "kerasseq-translator"]', encoding="utf-8")
    assert read_format_json(path, "kerasseq-translator") is None  # not an object
    path.write_text('{"format": "kerasseq-ctranslate2", "a": 1}', encoding="utf-8")
    assert read_format_json(path, "kerasseq-translator") is None  # another format
    assert read_format_json(path, "kerasseq-ctranslate2") == {"format": "kerasseq-ctranslate2",
                                                              "a": 1}
    (tmp_path / "directory.json").mkdir()
    assert read_format_json(tmp_path / "directory.json", "kerasseq-ctranslate2") is None
