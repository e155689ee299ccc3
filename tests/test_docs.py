"""The code in the documentation runs, and the outputs it shows are the real ones.

Every ```python block of every page under docs/ is executed, page by page, in
one fresh namespace per page, in the order of the page (one pytest case per
page). Blocks written as doctests (lines starting with `>>>`) are run with
`doctest`, so their expected output is checked too. A plain block followed by
a fenced block whose info string has `title="Output"` must print that output:
the same text once whitespace is collapsed, and numbers within 2 units of
their last printed digit or 0.1 % of their value, whichever is larger
(thousands separators allowed: "46,312" is one number).

A page that needs the internet can opt out with a line
`<!-- docs-test: skip -->`; the test then reports it as skipped. A page
whose code needs a program installed from Debian (e.g. `mod2imp` for the
SWORD Bibles, `make examples-data`) says so with
`<!-- docs-test: needs-command PROGRAM -->`: without it the page is skipped
with the reason.

With `KERASSEQ_DOCS_UPDATE` set (any non-empty value), an Output block that
does not match is rewritten with what the code printed (the page is saved
when all its blocks ran, and the test still fails, naming the count): after
a change of a page's code or data, run its test once that way and read the
diff.

The second test builds the site with `mkdocs build --strict`.
"""

import contextlib
import doctest
import io
import math
import os
import re
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

from tests import processes

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SKIP_MARKER = "<!-- docs-test: skip -->"
NEEDS_COMMAND = re.compile(r"<!-- docs-test: needs-command (\S+) -->")
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
# A number; "46,312" (thousands separators) is one number, not two.
NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def fenced_blocks(text):
    """`[(info, source, first_line_number), ...]` for every fenced block of `text`."""
    blocks, lines, index = [], text.splitlines(), 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence, info, start = match["fence"], match["info"].strip(), index + 1
        body, index = [], index + 1
        while index < len(lines) and not (
            lines[index].strip().startswith(fence) and lines[index].strip().strip(fence[0]) == ""
        ):
            body.append(lines[index][len(match["indent"]):])
            index += 1
        blocks.append((info, "\n".join(body) + "\n", start + 1))
        index += 1
    return blocks


def python_blocks(text):
    """`[(source, line_number, expected_output or None), ...]` in page order."""
    blocks = fenced_blocks(text)
    result = []
    for position, (info, source, line) in enumerate(blocks):
        language = info.split()[0].lstrip(".{") if info else ""
        if language not in ("python", "py", "pycon"):
            continue
        expected = None
        if position + 1 < len(blocks) and 'title="Output"' in blocks[position + 1][0]:
            expected = blocks[position + 1][1]
        result.append((source, line, expected))
    return result


def _split_numbers(text):
    words = " ".join(text.split())
    return NUMBER.split(words), NUMBER.findall(words)


def _close(actual, expected):
    """Equal within 2 units of the last printed digit, or 0.1 % of the value."""
    actual, expected = actual.replace(",", ""), expected.replace(",", "")
    actual_value, expected_value = float(actual), float(expected)
    mantissa, _, exponent = expected.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    # The last printed digit is worth 10^(exponent - decimals): "2.18e-07" -> 1e-09.
    last_digit = 10.0 ** (int(exponent or 0) - decimals)
    tolerance = max(2 * last_digit, 1e-3 * abs(expected_value))
    return math.isclose(actual_value, expected_value, abs_tol=tolerance)


def outputs_match(actual, expected):
    """Same text once whitespace is collapsed; numbers within `_close`."""
    actual_words, actual_numbers = _split_numbers(actual)
    expected_words, expected_numbers = _split_numbers(expected)
    return (
        actual_words == expected_words
        and len(actual_numbers) == len(expected_numbers)
        and all(_close(a, e) for a, e in zip(actual_numbers, expected_numbers, strict=True))
    )


def _is_doctest(source):
    first = next((line for line in source.splitlines() if line.strip()), "")
    return first.lstrip().startswith(">>>")


def _run_doctest(source, namespace, name, page, line):
    test = doctest.DocTestParser().get_doctest(source, namespace, name, str(page), line)
    report = io.StringIO()
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    runner.run(test, out=report.write, clear_globs=False)
    namespace.update(test.globs)  # DocTest works on a copy of the namespace
    if runner.failures:
        pytest.fail(f"{name} (doctest) failed:\n{report.getvalue()}", pytrace=False)


def _run_script(source, namespace, name, page, line, expected, updates=None):
    code = compile("\n" * (line - 1) + source, str(page), "exec")
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(code, namespace)
    except Exception:
        pytest.fail(f"{name} raised:\n{traceback.format_exc()}", pytrace=False)
    if expected is not None and not outputs_match(printed.getvalue(), expected):
        if updates is not None:
            updates[line] = printed.getvalue()
            return
        pytest.fail(
            f"{name} printed something else than the page shows.\n"
            f"--- page ---\n{expected}--- actual ---\n{printed.getvalue()}",
            pytrace=False,
        )


ALL_PAGES = sorted(DOCS.rglob("*.md"))
# The pages that train or start processes for half a minute or more run from
# tests/test_docs_long_pages.py: a file of its own, so the two pytest-xdist
# workers (`--dist loadfile`) share the docs pages instead of one running all.
LONG_PAGES = ("distributed.md", "migrating_from_tfa.md", "tutorial_bible.md",
              "tutorial_translate.md")
PAGES = [page for page in ALL_PAGES if str(page.relative_to(DOCS)) not in LONG_PAGES]
DEFAULT_PRINT_OPTIONS = np.get_printoptions()  # at import: NumPy's defaults


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
@pytest.mark.slow
def test_docs_page_code_runs(page, tmp_path, monkeypatch):
    run_page(page, tmp_path, monkeypatch)


def run_page(page, tmp_path, monkeypatch):
    """Run every python block of `page` (see the module docstring)."""
    text = page.read_text(encoding="utf-8")
    if SKIP_MARKER in text:
        pytest.skip(f"{page.relative_to(ROOT)} is marked {SKIP_MARKER} (needs the internet)")
    for program in NEEDS_COMMAND.findall(text):
        if shutil.which(program) is None:
            pytest.skip(f"{page.relative_to(ROOT)} needs `{program}`, which is not installed "
                        "(make examples-data)")
    blocks = python_blocks(text)
    if not blocks:
        pytest.skip(f"{page.relative_to(ROOT)} has no python block")
    monkeypatch.chdir(tmp_path)  # files a page writes land in a temporary directory
    monkeypatch.setattr(subprocess, "Popen", _page_popen)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace = {"__name__": "__docs__"}
    # Every page starts from NumPy's default print options, as a reader's
    # fresh Python does, whatever an earlier page in this process set.
    print_options = np.get_printoptions()
    np.set_printoptions(**DEFAULT_PRINT_OPTIONS)
    updates = {} if os.environ.get("KERASSEQ_DOCS_UPDATE") else None
    try:
        for number, (source, line, expected) in enumerate(blocks, start=1):
            name = f"{page.relative_to(ROOT)}, python block {number} (line {line})"
            if _is_doctest(source):
                _run_doctest(source, namespace, name, page, line)
            else:
                _run_script(source, namespace, name, page, line, expected, updates)
    finally:
        np.set_printoptions(**print_options)
    if updates:
        page.write_text(_updated_outputs(text, updates), encoding="utf-8")
        pytest.fail(f"{page.relative_to(ROOT)}: {len(updates)} Output block(s) rewritten "
                    "(KERASSEQ_DOCS_UPDATE); read the diff", pytrace=False)


def _updated_outputs(text, updates):
    """`text` with the Output block after the python block starting on line
    `line` replaced by `updates[line]`, for every `line` of `updates`."""
    lines = text.splitlines(keepends=True)
    blocks = fenced_blocks(text)
    for position in reversed(range(len(blocks) - 1)):
        _, _, line = blocks[position]
        info, body, start = blocks[position + 1]
        if line in updates and 'title="Output"' in info:
            new = updates[line] if updates[line].endswith("\n") else updates[line] + "\n"
            body_lines = len(body.splitlines())
            lines[start - 1:start - 1 + body_lines] = [new]
    return "".join(lines)


_REAL_POPEN = subprocess.Popen


def _page_popen(args, *more, **kwargs):
    """`subprocess.Popen` for a page's code: `python -m kerasseq_cli ...` (the
    workers of distributed.md) is forked from the zygote, as in the CLI tests
    (tests/processes.py: the same command without a TensorFlow import of its
    own); anything else, and the zygote itself, is a real process."""
    if more or getattr(_page_popen, "inside", False):
        return _REAL_POPEN(args, *more, **kwargs)
    _page_popen.inside = True
    try:
        return processes.popen(args, **kwargs)
    finally:
        _page_popen.inside = False


def test_output_comparison_rules():
    # Scientific notation: the exponent scales the last digit.
    assert outputs_match("2.19e-07", "2.18e-07")
    assert not outputs_match("3.49e-07", "2.18e-07")
    assert outputs_match("1.2e+03", "1.2e3") and not outputs_match("1.5e3", "1.2e3")
    assert outputs_match("i = 0.731\n", "i  =  0.731")
    assert outputs_match("[0.1 0.2]", "[ 0.1  0.2 ]".replace("[ ", "[").replace(" ]", "]"))
    assert outputs_match("0.3924", "0.3925")  # last printed digit may move
    assert not outputs_match("0.3924", "0.3934")
    assert not outputs_match("h = 0.392", "c = 0.392")
    assert outputs_match("46,312 parameters", "46,313 parameters")  # one number, not two
    assert not outputs_match("46,312 parameters", "47,312 parameters")
    assert outputs_match("(4, 1, 6)", "(4, 1, 6)") and not outputs_match("(4, 1, 6)", "(4, 1, 9)")
    blocks = python_blocks('```python\nprint(1)\n```\n\n```text title="Output"\n1\n```\n')
    assert blocks == [("print(1)\n", 2, "1\n")]


def test_update_mode_rewrites_only_the_output_blocks_that_differ():
    page = ('```python\nprint(1)\n```\n\ntext\n\n```text title="Output"\n1\n2\n```\n'
            '```python\nprint(3)\n```\n```text title="Output"\n3\n```\n')
    second = python_blocks(page)[1][1]
    updated = _updated_outputs(page, {2: "7\n", second: "8"})
    assert updated == page.replace("Output\"\n1\n2\n", "Output\"\n7\n").replace(
        "Output\"\n3\n", "Output\"\n8\n")
    assert _updated_outputs(page, {}) == page


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[dev]')")
    pytest.importorskip("material", reason="mkdocs-material is not installed")
    if not (ROOT / "mkdocs.yml").exists():
        pytest.fail("mkdocs.yml is missing at the repository root")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    assert (tmp_path / "site" / "index.html").exists()
    shutil.rmtree(tmp_path / "site", ignore_errors=True)
