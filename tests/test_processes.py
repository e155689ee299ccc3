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
    assert time.monotonic() - started < 30
    assert zygote.returncode is not None
    stuck.wait(timeout=30)  # its monitor is gone too: the status reads as killed
    assert stuck.returncode != 0
    stuck.stdout.close()
    try:
        os.kill(stuck.pid, 0)
    except ProcessLookupError:
        pass
    else:  # a zombie is not reaped by us; it must at least not be running
        with open(f"/proc/{stuck.pid}/stat") as handle:
            assert handle.read().split(")")[-1].split()[0] == "Z"
