"""Atomic writes: the one module every kerasseq writer goes through.

One scheme for files and directories alike. What is written goes first to a
hidden sibling of its path, `.NAME.tmp-PID-TOKEN[suffix]` (NAME the base
name, PID this process, TOKEN 12 random hex digits), in the same directory
(same file system), and is then renamed onto the path: a reader, or a
process killed mid-write, sees the old content or the new, never a part.

- Files (`replace_atomically`, `write_text_atomically`,
  `save_model_atomically`): one `os.replace`. Used by `kerasseq.training`
  (checkpoints, backups, history, summaries, `model.keras`) and
  `kerasseq.plotting`.
- Directories (`replace_directory_atomically`): the new directory is renamed
  in after the old one was renamed aside to `.NAME.old-PID-TOKEN`; the old
  one is deleted once the new one is in place. Used by `kerasseq.export`
  for SavedModels.
- Staging directories (`temporary_path` + `remove_stale_siblings`):
  `kerasseq.training.AtomicModelCheckpoint` lets Keras write into one and
  renames each file into place.

A process killed outright (SIGKILL) leaves its siblings behind (the cases:
`replace_directory_atomically`); the next write to the same path removes
those of dead processes (`stale_siblings`), set-aside directories only once
the new one is in place (until then one may be the only complete copy).
"""

import json
import os
import re
import shutil
import uuid


def _token():
    return f"{os.getpid()}-{uuid.uuid4().hex[:12]}"


def temporary_path(path, suffix=""):
    """A fresh hidden sibling of `path`: `.NAME.tmp-PID-TOKEN[suffix]` (absolute str)."""
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(directory, f".{name}.tmp-{_token()}{suffix}")


def remove(path):
    """Delete a file, a link or a directory tree at `path`; nothing if absent."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def process_is_running(pid):
    """False only when no process `pid` runs on this machine (probed with signal 0).

    Outside POSIX (where `os.kill(pid, 0)` would send a signal) and for this
    process itself the answer is always True, so nothing is cleaned up.
    """
    if os.name != "posix" or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OverflowError:
        return False  # not a valid pid: no process can own the directory
    except OSError:
        return True  # e.g. PermissionError: the process exists, owned by another user
    return True


def stale_siblings(path):
    """Leftovers of writes to `path` whose process was killed.

    Only hidden siblings named after `path` count: `.NAME.tmp-PID-TOKEN[suffix]`
    (something being written) and `.NAME.old-PID-TOKEN` (a previous directory
    set aside), and only when no process `PID` is running.

    Args:
        path: str or path-like.

    Returns:
        `{"tmp": [paths], "old": [paths]}`, sorted absolute paths.
    """
    parent, name = os.path.split(os.path.abspath(path))
    pattern = re.compile(rf"\.{re.escape(name)}\.(tmp|old)-(\d{{1,10}})-[0-9a-f]{{12}}(\..+)?")
    stale = {"tmp": [], "old": []}
    try:
        entries = sorted(os.listdir(parent))
    except FileNotFoundError:
        return stale
    for entry in entries:
        match = pattern.fullmatch(entry)
        if match and not (match.group(1) == "old" and match.group(3)) and not process_is_running(
                int(match.group(2))):
            stale[match.group(1)].append(os.path.join(parent, entry))
    return stale


def remove_stale_siblings(path, kinds=("tmp", "old")):
    """Delete `stale_siblings(path)` of the given kinds; returns what was deleted."""
    stale = stale_siblings(path)
    removed = [leftover for kind in kinds for leftover in stale[kind]]
    for leftover in removed:
        remove(leftover)
    return removed


def replace_atomically(write, path, suffix=""):
    """Call `write(temporary_path)`, then rename the result onto `path`.

    Args:
        write: callable that writes a complete file at the path it is given.
        path: str or path-like, the file to create or replace.
        suffix: appended to the temporary name (e.g. ".keras", ".png": some
            writers pick the format from the extension).

    Returns:
        `path` as a str. Missing parent directories are created; if `write`
        fails, `path` is untouched and the temporary file removed. Stale
        temporary files of killed processes are removed first.
    """
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    remove_stale_siblings(path, kinds=("tmp",))
    temporary = temporary_path(path, suffix)
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.lexists(temporary):
            remove(temporary)
    return path


def write_text_atomically(path, text):
    """Write `text` (UTF-8) to `path` via a temporary file, fsync and an atomic rename."""

    def write(temporary):
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    return replace_atomically(write, path)


def read_format_json(path, file_format):
    """The JSON object in `path` if its `"format"` is `file_format`, else `None`.

    The one reader of the files that mark a directory as a kerasseq export
    (`kerasseq.export.read_metadata`, the CTranslate2 export's
    `kerasseq_ctranslate2.json`): a file that is missing, unreadable, not
    JSON, not an object or of another format gives `None`.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            content = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(content, dict) or content.get("format") != file_format:
        return None
    return content


def save_model_atomically(model, path):
    """`model.save(path)` (a `.keras` file) via a temporary file and an atomic rename."""
    return replace_atomically(model.save, path, suffix=".keras")


def replace_directory_atomically(path, write, check=None):
    """Create or replace the directory `path` with `write(directory)`, all or nothing.

    `write` fills a fresh temporary directory `.NAME.tmp-PID-TOKEN` next to
    `path`; the directory is then renamed to `path` (one `rename` on the same
    file system). An existing `path` is first renamed aside to
    `.NAME.old-PID-TOKEN` (same token) and deleted after the new one is in
    place; if the final rename fails it is renamed back. `check(path)`, when
    given, decides whether an existing `path` may be replaced (it raises if
    not): it runs before anything is written and again right before the
    rename.

    A process killed outright (SIGKILL, so no `finally` runs) never leaves a
    half-written directory at `path`:

    * killed while `write` runs: `path` is untouched; a partial
      `.NAME.tmp-PID-TOKEN` remains;
    * killed between the two renames: `path` is briefly absent. The previous
      directory sits complete in `.NAME.old-PID-TOKEN` and the new one
      complete in `.NAME.tmp-PID-TOKEN` (same token); rename either to `path`
      to recover by hand;
    * killed after the second rename: `path` is the new directory; the old
      one remains in `.NAME.old-PID-TOKEN`.

    The next call for the same `path` removes such leftovers (module
    docstring).

    Args:
        path: absolute str, the directory to create or replace.
        write: callable taking the temporary directory path.
        check: optional callable taking `path` when it exists; raises to
            refuse the replacement.

    Raises:
        Whatever `check` raises; `path` is then untouched and no temporary
        directory remains. Whatever `write` raises; `path` is then untouched
        and the temporary directory removed.
    """
    if check is not None and os.path.lexists(path):
        check(path)  # before anything is written
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    stale = stale_siblings(path)
    for leftover in stale["tmp"]:
        remove(leftover)
    token = _token()
    name = os.path.basename(path)
    temporary = os.path.join(parent, f".{name}.tmp-{token}")
    aside = os.path.join(parent, f".{name}.old-{token}")  # same token
    os.mkdir(temporary)
    try:
        write(temporary)
        if os.path.lexists(path):
            # `path` may have appeared or changed while `write` ran.
            if check is not None:
                check(path)
            os.rename(path, aside)
            # A SIGKILL here leaves `path` absent and both directories complete.
            try:
                os.rename(temporary, path)
            except BaseException:
                os.rename(aside, path)
                raise
            remove(aside)
        else:
            os.rename(temporary, path)
        for leftover in stale["old"]:  # the new directory is in place
            remove(leftover)
    finally:
        remove(temporary)
