"""Multi-worker faults: a stuck worker ends the run with one clear line.

(A file of its own, so that pytest-xdist's two workers can share the slow
multi-worker tests; a killed worker: test_multi_worker.py's kill-and-rerun test.)
"""

import time

from tests.training.test_multi_worker import (
    _wait_for_batch,
    start_workers,
    train_command,
)


def test_cli_chief_ends_with_a_clear_error_when_a_worker_is_stuck(tmp_path):
    # Worker 1 is alive (it heartbeats) but sleeps 120 s after its first batch,
    # so the chief's next all-reduce waits: --collective-timeout ends the wait.
    # (A killed worker: test_cli_workers_kill_one_then_rerun_resumes.)
    run_dir = str(tmp_path / "run")
    chief_command = train_command(run_dir, 2, "--slow-batches", "0.3",
                                  "--collective-timeout", "12")
    worker_command = train_command(str(tmp_path / "run1"), 2, "--collective-timeout", "12",
                                   "--slow-batches", "120")
    chief, worker = start_workers([chief_command, worker_command])
    try:
        _wait_for_batch(chief, "kerasseq-debug: epoch 0 batch 0 done")
        started = time.time()
        _, err = chief.communicate(timeout=120)
        waited = time.time() - started
    finally:
        for process in (chief, worker):
            if process.poll() is None:
                process.kill()
    assert chief.returncode == 2, err[-3000:]
    message = err.strip().splitlines()[-1]
    assert message.startswith("kerasseq train: error: a worker was lost in epoch 0: "), err[-3000:]
    assert "rerun the same command on every worker" in message
    assert "Traceback" not in err
    assert waited < 90 and "DeadlineExceededError" in message, message
