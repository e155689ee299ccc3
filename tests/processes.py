"""Child processes for the tests, without a TensorFlow import each.

A fresh Python process costs about 6 CPU-seconds before it does anything,
importing TensorFlow, Keras and kerasseq; the suite starts dozens of
them (CLI runs, SavedModel servers, multi-worker workers). `popen` and `run`
take the arguments of `subprocess.Popen` / `subprocess.run`. A command
`[sys.executable, "-m", "kerasseq_cli", ...]`, or `[sys.executable, "-c",
SCRIPT, ...]` or `[sys.executable, "script.py", ...]` passed with
`forked=True`, is instead forked from a *zygote*
(`tests/zygote.py`): one process per pytest worker that imported those
libraries once and never ran a TensorFlow op. The fork is what the fresh
process would be after its imports; it has its own pid (`kill` works), its
own stdin/stdout/stderr pipes, environment and working directory, and its
exit status is reported as `subprocess` reports it.

Everything else, and every command whose environment differs from the
zygote's in what is read at import time (`IMPORT_TIME`: e.g. a test that
leaves TF_CPP_MIN_LOG_LEVEL unset to see what the CLI does about TensorFlow's
start-up lines), runs as a real process. So does everything when
KERASSEQ_TEST_FORK=0 (the suite then checks the same behaviours the slow way).
"""

import io
import json
import locale
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tests.zygote import HEADER

ROOT = Path(__file__).resolve().parents[1]
IMPORT_TIME = ("TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND", "PYTHONPATH", "PYTHONHASHSEED",
               "TF_ENABLE_ONEDNN_OPTS", "KERAS_HOME")
_ZYGOTES = {}
_LOCK = threading.Lock()
# CPU seconds (user + sys) of the forked commands that have ended, for the
# per-test CPU log of tests/conftest.py (they are the zygote's grandchildren).
FORKED_CPU_SECONDS = [0.0]
STOP_TIMEOUT = 60  # seconds `stop_zygotes` waits for commands still running


def _enabled():
    return os.environ.get("KERASSEQ_TEST_FORK", "1") != "0"


def _import_key(env):
    return tuple(env.get(name) for name in IMPORT_TIME)


class _Zygote:
    def __init__(self, env):
        # A short directory: a Unix socket's path has at most 107 bytes.
        self.directory = tempfile.mkdtemp(prefix="kerasseq-zygote-",
                                          dir="/tmp" if os.path.isdir("/tmp") else None)
        self.path = os.path.join(self.directory, "socket")
        # A process group of its own: the zygote, its monitors and the
        # commands they fork, which `stop` can end together.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.zygote", self.path], cwd=ROOT, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, process_group=0)
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            self.process.kill()
            raise RuntimeError(f"the test zygote did not start (printed {line!r})")

    def request(self, request, fds):
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(self.path)
        payload = json.dumps(request).encode()
        socket.send_fds(connection, [HEADER.pack(len(payload)) + payload], fds)
        return connection

    def stop(self):
        """Ask the zygote to end; it waits for the commands still running. One
        that outlives `STOP_TIMEOUT` seconds (left by a test that timed out: a
        worker stuck in an all-reduce) is killed with the zygote's group, so
        the session ends instead of hanging."""
        try:
            self.request({"stop": True}, []).close()
        except OSError:
            self.process.kill()
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()  # its CPU time is counted with the pytest process's children
        self.process.stdout.close()
        for name in os.listdir(self.directory):
            os.remove(os.path.join(self.directory, name))
        os.rmdir(self.directory)


def _zygote(env):
    key = _import_key(env)
    with _LOCK:
        if key not in _ZYGOTES:
            _ZYGOTES[key] = _Zygote(env)
        return _ZYGOTES[key]


def stop_zygotes():
    """Stop every zygote of this process (the suite's session teardown)."""
    with _LOCK:
        while _ZYGOTES:
            _ZYGOTES.popitem()[1].stop()


class ForkedProcess:
    """The part of `subprocess.Popen`'s interface the tests use."""

    def __init__(self, args, module, source, path, env, cwd, stdin, stdout, stderr, text):
        self.args, self.returncode = args, None
        self._finished = threading.Event()
        ours, theirs = {}, []
        for number, choice in enumerate((stdin, stdout, stderr)):
            if choice == subprocess.PIPE:
                read, write = os.pipe()
                ours[number], child = (write, read) if number == 0 else (read, write)
            elif choice == subprocess.DEVNULL:
                child = os.open(os.devnull, os.O_RDWR)
            elif choice == subprocess.STDOUT:
                child = os.dup(theirs[1])
            elif choice is None:
                child = os.dup(number)
            else:
                child = os.dup(choice if isinstance(choice, int) else choice.fileno())
            theirs.append(child)
        request = {"module": module, "source": source, "path": path,
                   "args": [str(arg) for arg in args[2 if path else 3:]],
                   "env": env, "cwd": os.fspath(cwd or os.getcwd())}
        try:
            self._connection = _zygote(env).request(request, theirs)
        finally:
            for fd in theirs:
                os.close(fd)
        self._lines = self._connection.makefile("r", encoding="utf-8")
        self.pid = json.loads(self._lines.readline())["pid"]
        encoding = locale.getpreferredencoding(False)

        def stream(number):
            if number not in ours:
                return None
            mode = "w" if number == 0 else "r"
            if text:
                return io.open(ours[number], mode, encoding=encoding)
            return io.open(ours[number], mode + "b")

        self.stdin, self.stdout, self.stderr = stream(0), stream(1), stream(2)
        threading.Thread(target=self._wait_for_status, daemon=True).start()

    def _wait_for_status(self):
        line = self._lines.readline()
        report = json.loads(line) if line else {"status": -signal.SIGKILL, "cpu": 0.0}
        with _LOCK:
            FORKED_CPU_SECONDS[0] += report["cpu"]
        self.returncode = report["status"]
        self._lines.close()
        self._connection.close()
        self._finished.set()

    def poll(self):
        return self.returncode if self._finished.is_set() else None

    def wait(self, timeout=None):
        if not self._finished.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, number):
        if not self._finished.is_set():
            try:
                os.kill(self.pid, number)
            except ProcessLookupError:
                pass

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def communicate(self, input=None, timeout=None):
        results, readers = {}, []
        for name in ("stdout", "stderr"):
            handle = getattr(self, name)
            if handle is not None:
                reader = threading.Thread(target=lambda n=name, h=handle: results.__setitem__(
                    n, h.read()), daemon=True)
                reader.start()
                readers.append(reader)
        if self.stdin is not None:
            try:
                if input:
                    self.stdin.write(input)
                self.stdin.close()
            except BrokenPipeError:
                pass
        self.wait(timeout)
        for reader in readers:
            reader.join(timeout)
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        for name in ("stdout", "stderr"):
            handle = getattr(self, name)
            if handle is not None:
                handle.close()
        return results.get("stdout"), results.get("stderr")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        self.wait()


def _forkable(args, env, forked):
    if not (_enabled() and isinstance(args, list) and args and args[0] == sys.executable):
        return None
    if any(name not in env for name in ("TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND")):
        return None
    if env.get("KERAS_BACKEND") != "tensorflow":
        return None
    if args[1:3] == ["-m", "kerasseq_cli"]:
        return "kerasseq_cli", None, None
    if forked and len(args) >= 3 and args[1] == "-c":
        return None, args[2], None
    if forked and len(args) >= 2 and str(args[1]).endswith(".py"):
        return None, None, str(args[1])
    return None


def popen(args, *, env=None, cwd=None, stdin=None, stdout=None, stderr=None, text=False,
          forked=False, **kwargs):
    """`subprocess.Popen(args, ...)`, forked from the zygote where it can be."""
    env = dict(os.environ if env is None else env)
    route = _forkable(args, env, forked) if not kwargs else None
    if route is None:
        return subprocess.Popen(args, env=env, cwd=cwd, stdin=stdin, stdout=stdout,
                                stderr=stderr, text=text, **kwargs)
    return ForkedProcess(args, *route, env, cwd, stdin, stdout, stderr, text)


def run(args, *, input=None, capture_output=False, timeout=None, check=False, **kwargs):
    """`subprocess.run(args, ...)`, forked from the zygote where it can be."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    process = popen(args, **kwargs)
    try:
        stdout, stderr = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    result = subprocess.CompletedProcess(args, process.returncode, stdout, stderr)
    if check:
        result.check_returncode()
    return result
