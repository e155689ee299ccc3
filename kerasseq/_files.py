"""Atomic file writes: the one primitive every kerasseq writer uses.

A file is written under a temporary name in its own directory (same file
system) and `os.replace`d onto its path: a reader, or a process killed
mid-write, sees the old file or the new one, never a partial one.
`kerasseq.training` (checkpoints, backups, history, summaries, `model.keras`)
and `kerasseq.plotting` write through it; `kerasseq.export` builds whole
SavedModel directories with its own directory-level rename
(`write_atomically`).
"""

import os


def temporary_path(path, suffix=""):
    """A hidden path next to `path`: `.NAME.tmp-PID[suffix]`."""
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(directory, f".{name}.tmp-{os.getpid()}{suffix}")


def replace_atomically(write, path, suffix=""):
    """Call `write(temporary_path)`, then rename the result onto `path`.

    Args:
        write: callable that writes a complete file at the path it is given.
        path: str or path-like, the file to create or replace.
        suffix: appended to the temporary name (e.g. ".keras", ".png": some
            writers pick the format from the extension).

    Returns:
        `path` as a str. Missing parent directories are created; if `write`
        fails, `path` is untouched and the temporary file removed.
    """
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temporary = temporary_path(path, suffix)
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return path


def write_text_atomically(path, text):
    """Write `text` (UTF-8) to `path` via a temporary file, fsync and an atomic rename."""

    def write(temporary):
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    return replace_atomically(write, path)


def save_model_atomically(model, path):
    """`model.save(path)` (a `.keras` file) via a temporary file and an atomic rename."""
    return replace_atomically(model.save, path, suffix=".keras")
