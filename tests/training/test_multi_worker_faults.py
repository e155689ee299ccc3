"""Multi-worker faults: a stuck worker ends the run with one clear line.

(A file of its own, so that pytest-xdist's two workers can share the slow
multi-worker tests; a killed worker: test_multi_worker.py's kill-and-rerun test.)
"""

import pytest

from tests.training.test_multi_worker import (
    PROCESS_DEADLINE,
    _wait_for_batch,
    start_workers,
    train_command,
)

pytestmark = pytest.mark.slow  # the multi-worker processes: `make test-all` only

# The collective timeout under test. Every all-reduce of the run is bound by it,
# the ones before the first batch too, where one worker may wait for the other
# to finish building its dataset and tracing its step. That lag grows with the
# machine's load (two identical processes get unequal shares of 2 busy cores),
# so the 12 s this had could end a healthy run before its first batch. 60 s is
# far above any such lag; the test waits it out once (idle, not CPU time).
COLLECTIVE_TIMEOUT = "60"
# Worker 1's stall after its first batch: longer than any run of this test (it
# is killed at the end), so the chief can only end its wait by the timeout,
# however slow the machine (it slept 120 s: a slow enough chief would have
# seen it wake up and go on).
STALL = "86400"


def test_cli_chief_ends_with_a_clear_error_when_a_worker_is_stuck(tmp_path):
    # Worker 1 is alive (it heartbeats) but sleeps after its first batch, so the
    # chief's next all-reduce waits: --collective-timeout ends the wait.
    # (A killed worker: test_cli_workers_kill_one_then_rerun_resumes.)
    run_dir = str(tmp_path / "run")
    chief_command = train_command(run_dir, 2, "--slow-batches", "0.3",
                                  "--collective-timeout", COLLECTIVE_TIMEOUT)
    worker_command = train_command(str(tmp_path / "run1"), 2, "--collective-timeout",
                                   COLLECTIVE_TIMEOUT, "--slow-batches", STALL)
    chief, worker = start_workers([chief_command, worker_command])
    try:
        _wait_for_batch(chief, "kerasseq-debug: epoch 0 batch 0 done")
        _, err = chief.communicate(timeout=PROCESS_DEADLINE)
        # The chief ended while worker 1 still sleeps: it did not wait for it.
        # (This replaces a bound on the chief's wall time, 90 s, which a
        # loaded machine could exceed.)
        worker_still_stuck = worker.poll() is None
    finally:
        for process in (chief, worker):
            if process.poll() is None:
                process.kill()
    assert chief.returncode == 2, err[-3000:]
    message = err.strip().splitlines()[-1]
    assert message.startswith("kerasseq train: error: a worker was lost in epoch 0: "), err[-3000:]
    assert "rerun the same command on every worker" in message
    assert "Traceback" not in err
    assert worker_still_stuck and "DeadlineExceededError" in message, message
