"""The notebooks of the docs pages (docs/hooks/notebooks.py) are the pages' own code.

The docs build gives every page whose Python tests/test_docs.py runs a
Jupyter notebook next to it in the site. These tests make the notebooks with
the hook's own function (`page_notebook`, the hook module imported by path),
without building the site:

- every page: the notebook is valid (nbformat), its code cells are exactly
  the blocks tests/test_docs.py runs, in order (a doctest block gives one
  cell per example), the output stored under each cell is the page's output
  block (or the doctest's expected output), and every other fenced block
  (mermaid, shell, text) is still in the Markdown. A page without such blocks
  gets no notebook;
- one short page's notebook runs end to end in a Jupyter kernel (ipykernel,
  this Python) with nbclient, and prints what the page shows, by the rule
  of tests/test_docs.py (`outputs_match`).

The link to the notebook and the notebook's place in the site are checked
by the strict build of tests/test_docs.py (test_mkdocs_build_strict), which
fails on a link to a file the site does not have.
"""

import doctest
import functools
import importlib.util
import json
import platform
import sys
from types import SimpleNamespace

import pytest

from tests.test_docs import (
    ALL_PAGES,
    DOCS,
    ROOT,
    SKIP_MARKER,
    _is_doctest,
    fenced_blocks,
    outputs_match,
    python_blocks,
)

pytestmark = pytest.mark.slow  # the docs pages' notebooks: `make test-all` only

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (pip install -e '.[dev]')")
pytest.importorskip("jupytext", reason="jupytext is not installed (pip install -e '.[dev]')")
pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[dev]')")

HOOK = ROOT / "docs" / "hooks" / "notebooks.py"
# The page whose notebook is run: two blocks, a few seconds on a CPU.
EXECUTED_PAGE = DOCS / "components" / "feed_forward.md"
# Per cell and for the kernel's start: a guard against a hang, not a speed limit.
CELL_TIMEOUT_S = 600


def load_hook():
    spec = importlib.util.spec_from_file_location("kerasseq_docs_hook_notebooks", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = load_hook()


def page_id(page):
    return str(page.relative_to(DOCS))


@functools.cache
def notebook_of(page):
    """The hook's notebook of `page` (None without one), made once per test run."""
    return hook.page_notebook(page.read_text(encoding="utf-8"), page_id(page))


def expected_cells(text):
    """`[(code, expected_output or None), ...]`: the cells the page's notebook must have."""
    if SKIP_MARKER in text:
        return []
    cells = []
    for source, _, expected in python_blocks(text):
        if _is_doctest(source):
            cells += [(example.source, example.want or None)
                      for example in doctest.DocTestParser().get_examples(source)]
        else:
            cells.append((source, expected))
    return cells


def stored_output(cell):
    """The text a code cell shows under it: printed text, result or traceback."""
    text = []
    for output in cell.outputs:
        if output.output_type == "stream":
            text.append(output.text)
        elif output.output_type == "execute_result":
            text.append(output.data["text/plain"] + "\n")
        elif output.output_type == "error":
            text.append("\n".join(output.traceback) + "\n")
    return "".join(text) or None


def printed(cell):
    return "".join(output.text for output in cell.outputs
                   if output.output_type == "stream" and output.name == "stdout")


def other_blocks(text):
    """Bodies of the fenced blocks that are neither run nor shown as a block's output."""
    blocks = fenced_blocks(text)
    languages = [info.split()[0].lstrip(".{") if info else "" for info, _, _ in blocks]
    bodies = []
    for position, (info, body, _) in enumerate(blocks):
        shown_output = ('title="Output"' in info and position > 0
                        and languages[position - 1] in hook.EXECUTED_LANGUAGES)
        if languages[position] not in hook.EXECUTED_LANGUAGES and not shown_output:
            bodies.append(body)
    return bodies


@pytest.mark.parametrize("page", ALL_PAGES, ids=[page_id(p) for p in ALL_PAGES])
def test_notebook_is_the_pages_code(page):
    text = page.read_text(encoding="utf-8")
    expected = expected_cells(text)
    notebook = notebook_of(page)
    if not expected:
        assert notebook is None, f"{page_id(page)} has no block that runs, but got a notebook"
        return
    assert notebook is not None, f"{page_id(page)} has python blocks that run, but no notebook"
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [cell.source for cell in code] == [source.rstrip("\n") for source, _ in expected]
    for number, (cell, (_, output)) in enumerate(zip(code, expected, strict=True), start=1):
        stored = stored_output(cell)
        assert (stored or "").rstrip("\n") == (output or "").rstrip("\n"), (
            f"{page_id(page)}, code cell {number}: stored output differs from the page's")
    markdown = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    for body in other_blocks(text):
        assert body.rstrip("\n") in markdown, f"{page_id(page)}: a fenced block is missing:\n{body}"
    assert "!!! " not in markdown, "an admonition was left for Jupyter, which cannot show it"
    # Same page, same file: a rebuild writes identical bytes (numbered cell ids).
    assert nbformat.writes(hook.page_notebook(text, page_id(page))) == nbformat.writes(notebook)


def test_pages_with_code_get_notebooks():
    made = [page for page in ALL_PAGES if notebook_of(page) is not None]
    assert len(made) >= 30, [page_id(p) for p in made]
    assert EXECUTED_PAGE in made


def test_download_link_under_the_title():
    page = SimpleNamespace(file=SimpleNamespace(src_uri="components/feed_forward.md"))
    with_notebook = SimpleNamespace(get_file_from_path=lambda uri: object())
    markdown = "# Feed-forward\n\nThe layer.\n"
    linked = hook.on_page_markdown(markdown, page=page, config=None, files=with_notebook)
    assert linked.splitlines()[:3] == [
        "# Feed-forward", "",
        '[Download as a notebook](feed_forward.ipynb){ download="feed_forward.ipynb" }']
    assert linked.endswith(markdown.split("\n", 1)[1])
    without = SimpleNamespace(get_file_from_path=lambda uri: None)
    assert hook.on_page_markdown(markdown, page=page, config=None, files=without) == markdown
    assert hook.notebook_uri("components/feed_forward.md") == "components/feed_forward.ipynb"


def test_admonitions_become_block_quotes():
    text = ('# T\n\n!!! note "Erratum: a sum"\n\n    The sum is **0.40**.\n\n'
            "    Second paragraph.\n\nAfter.\n\n```python\nprint(1)\n```\n")
    markdown = hook.page_notebook(text, "t.md").cells[0].source
    assert "> **Erratum: a sum**\n>\n> The sum is **0.40**.\n>\n> Second paragraph.\n\nAfter." \
        in markdown


def test_notebook_runs_and_prints_what_the_page_shows(tmp_path):
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (pip install -e '.[dev]')")
    kernelspec = pytest.importorskip("ipykernel.kernelspec",
                                     reason="ipykernel is not installed (pip install -e '.[dev]')")
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    # A kernel spec of this very Python (the venv's), not whatever `python3`
    # kernel the machine has registered.
    spec_dir = kernelspec.write_kernel_spec(tmp_path / "kernels" / "python3")
    argv = json.loads((tmp_path / "kernels" / "python3" / "kernel.json").read_text())["argv"]
    assert argv[0] == sys.executable, spec_dir
    manager = KernelManager(
        kernel_name="python3",
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")],
                                              ensure_native_kernel=False),
    )

    text = EXECUTED_PAGE.read_text(encoding="utf-8")
    notebook = hook.page_notebook(text, page_id(EXECUTED_PAGE))
    for cell in notebook.cells:  # the page's outputs, stored by the hook, are not the run's
        if cell.cell_type == "code":
            cell.outputs = []
    work = tmp_path / "work"  # files a page writes land in a temporary directory
    work.mkdir()
    client = nbclient.NotebookClient(
        notebook, km=manager, timeout=CELL_TIMEOUT_S, startup_timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(work)}},
    )
    client.execute()

    assert notebook.metadata["language_info"]["version"] == platform.python_version()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    blocks = python_blocks(text)
    assert len(code) == len(blocks) and all(expected for _, _, expected in blocks)
    for number, (cell, (_, line, expected)) in enumerate(zip(code, blocks, strict=True), start=1):
        assert not [output for output in cell.outputs if output.output_type == "error"]
        assert outputs_match(printed(cell), expected), (
            f"{page_id(EXECUTED_PAGE)}, cell {number} (line {line}) printed something else "
            f"than the page shows.\n--- page ---\n{expected}--- notebook ---\n{printed(cell)}")
