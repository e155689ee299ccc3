"""The server side of `tests/processes.py`: a process that has imported
TensorFlow, Keras and kerasseq once and forks one child per command.

Run as `python -m tests.zygote SOCKET` from the repository root. It prints `ready` on stdout once the
imports are done and the socket listens, then serves requests until one asks
it to stop. It never runs a TensorFlow op (no eager context, no thread pool, no
device), so a fork of it is what a fresh process would be just after its
imports: a distribution strategy, the logical devices and TF_CONFIG can still
be set up by the command.

A request is a length-prefixed JSON object with the three file descriptors
the command gets as stdin, stdout and stderr (passed with SCM_RIGHTS). For
each request the server forks a *monitor*, which forks the command, sends its
pid, waits for it and sends its exit status (negative: killed by that signal,
as `subprocess` reports it) and its CPU seconds. Every process waits for its children, so the
CPU time of every command reaches the pytest process and `time make test`.
"""

import atexit
import gc
import json
import os
import runpy
import signal
import socket
import struct
import sys
import traceback
import types

HEADER = struct.Struct("!I")


def _receive(connection):
    """`(request, fds)` of one request; `(None, [])` when the peer closed."""
    data, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    if len(data) < HEADER.size:
        return None, list(fds)
    (size,) = HEADER.unpack_from(data)
    data = data[HEADER.size:]
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionError("request cut short")
        data += chunk
    return json.loads(data), list(fds)


def _run_command(request, fds):
    """In the forked child: become the command and exit with its status."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    for number in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(number, signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    code = 0
    try:
        if request["module"] is not None:
            sys.argv = [request["module"], *request["args"]]
            sys.path[0] = os.getcwd()
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        elif request["path"] is not None:
            sys.argv = [request["path"], *request["args"]]
            sys.path[0] = os.path.dirname(os.path.abspath(request["path"]))
            runpy.run_path(request["path"], run_name="__main__")
        else:
            sys.argv = ["-c", *request["args"]]
            sys.path[0] = ""
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(request["source"], "<string>", "exec"), main.__dict__)
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001  (what the interpreter would print)
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _monitor(connection, request, fds):
    """In the forked monitor: fork the command, report its pid and its status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        connection.close()
        _run_command(request, fds)
    for fd in fds:
        os.close(fd)
    try:
        connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status, usage = os.wait4(pid, 0)
        report = {"status": os.waitstatus_to_exitcode(status),
                  "cpu": usage.ru_utime + usage.ru_stime}
        connection.sendall(json.dumps(report).encode() + b"\n")
    except OSError:
        pass
    finally:
        os._exit(0)


def serve(path):
    import keras  # noqa: F401
    import tensorflow  # noqa: F401

    import kerasseq  # noqa: F401
    import kerasseq_cli  # noqa: F401
    import kerasseq_cli.commands  # noqa: F401

    # The imported objects are never garbage: frozen, the commands' full
    # collections skip them (and don't write to the pages the forks share).
    gc.collect()
    gc.freeze()

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    print("ready", flush=True)
    monitors = set()
    while True:
        connection, _ = server.accept()
        request, fds = _receive(connection)
        for pid in list(monitors):  # reap the monitors that are done
            if os.waitpid(pid, os.WNOHANG)[0]:
                monitors.discard(pid)
        if request is None or request.get("stop"):
            for fd in fds:
                os.close(fd)
            connection.close()
            break
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            server.close()
            _monitor(connection, request, fds)
        monitors.add(pid)
        connection.close()
        for fd in fds:
            os.close(fd)
    server.close()
    for pid in monitors:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    serve(sys.argv[1])
