"""The test zygote (tests/processes.py) ends with the session even when a forked
command is stuck: a test that timed out must not leave the suite hanging."""

import os
import subprocess
import sys
import time

from tests import processes


def test_stop_kills_a_command_that_outlives_the_timeout(monkeypatch):
    monkeypatch.setattr(processes, "_ZYGOTES", {})  # a zygote of its own, not the session's
    monkeypatch.setattr(processes, "STOP_TIMEOUT", 1)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow"}
    # Ignores SIGTERM and never ends on its own, like a worker stuck in a collective.
    stuck = processes.popen(
        [sys.executable, "-c", "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
         "print('started', flush=True)\ntime.sleep(3600)"],
        env=env, forked=True, stdout=subprocess.PIPE, text=True)
    assert isinstance(stuck, processes.ForkedProcess)
    assert stuck.stdout.readline().strip() == "started"
    zygote = next(iter(processes._ZYGOTES.values())).process
    started = time.monotonic()
    processes.stop_zygotes()
    # Far below the command's 3600 s, so it was not waited for; not the seconds
    # it takes on an idle machine (about 1 s), which a loaded one can exceed.
    # The waits below poll and return as soon as the process is gone: their
    # deadlines (minutes) cost a healthy run nothing.
    assert time.monotonic() - started < 600
    assert zygote.returncode is not None
    stuck.wait(timeout=600)  # its monitor is gone too: the status reads as killed
    assert stuck.returncode != 0
    stuck.stdout.close()
    assert _ended(stuck.pid, seconds=600)


def _ended(pid, seconds):
    """True once `pid` has exited (gone, or a zombie nobody reaped yet): the
    SIGKILL is sent, the process takes a moment to be torn down."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().split(")")[-1].split()[0] in ("Z", "X"):
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False
