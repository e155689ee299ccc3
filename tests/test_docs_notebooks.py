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
  of tests/test_docs.py (`outputs_match`);
- a notebook works downloaded alone: read with markdown-it (not the hook's
  own pattern), no link or image of any notebook is relative; every image is
  an attachment of its cell that decodes as a PNG and is byte for byte the
  file the page shows, and every attachment is shown; the rewriting itself
  is checked against a hand-written page (links up, down and to the same
  page, anchors, titles, two images of one name, an SVG, code left alone);
- the built site (`mkdocs build`, once): its notebooks are the hook's, and
  every link of theirs into the site names a page or file the build wrote,
  and an anchor that page has.

The link to the notebook and the notebook's place in the site are checked
by the strict build of tests/test_docs.py (test_mkdocs_build_strict), which
fails on a link to a file the site does not have.
"""

import base64
import doctest
import functools
import html.parser
import importlib.util
import io
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
from types import SimpleNamespace
from urllib.parse import urlsplit

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
BUILD_TIMEOUT_S = 1200  # `mkdocs build`, as tests/test_docs_browser.py (seconds when idle)


def load_hook():
    spec = importlib.util.spec_from_file_location("kerasseq_docs_hook_notebooks", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = load_hook()


def page_id(page):
    return str(page.relative_to(DOCS))


@functools.cache
def site():
    """`(files, site_url)` of the docs as `mkdocs build` sees them (no build)."""
    from mkdocs.config import load_config
    from mkdocs.structure.files import get_files

    config = load_config(str(ROOT / "mkdocs.yml"))
    assert config["site_url"], "mkdocs.yml sets no site_url (the notebooks' links need it)"
    return get_files(config), config["site_url"]


@functools.cache
def notebook_of(page):
    """The hook's notebook of `page` (None without one), made once per test run."""
    return hook.page_notebook(page.read_text(encoding="utf-8"), page_id(page), *site())


def small_site(root, sources):
    """`Files` of a docs folder `root` holding `sources` (`{path: text or bytes}`)."""
    from mkdocs.structure.files import File, Files

    for path, content in sources.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            (root / path).write_bytes(content)
        else:
            (root / path).write_text(content, encoding="utf-8")
    return Files([File(path, str(root), str(root.parent / "site"), use_directory_urls=True)
                  for path in sources])


def markdown_targets(markdown):
    """`(links, images, html)` of a Markdown text, read by markdown-it: the
    link destinations, the image sources and the raw HTML fragments."""
    from markdown_it import MarkdownIt

    links, images, raw = [], [], []
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        if token.type == "html_block":
            raw.append(token.content)
        for child in token.children or []:
            if child.type == "link_open":
                links.append(child.attrGet("href"))
            elif child.type == "image":
                images.append(child.attrGet("src"))
            elif child.type == "html_inline":
                raw.append(child.content)
    return links, images, raw


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
    assert nbformat.writes(hook.page_notebook(text, page_id(page), *site())) == \
        nbformat.writes(notebook)


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


def test_admonitions_become_block_quotes(tmp_path):
    text = ('# T\n\n!!! note "Erratum: a sum"\n\n    The sum is **0.40**.\n\n'
            "    Second paragraph.\n\nAfter.\n\n```python\nprint(1)\n```\n")
    files = small_site(tmp_path / "docs", {"t.md": text})
    markdown = hook.page_notebook(text, "t.md", files, "https://example.org/").cells[0].source
    assert "> **Erratum: a sum**\n>\n> The sum is **0.40**.\n>\n> Second paragraph.\n\nAfter." \
        in markdown


SUB_PAGE = """# Sub page

Up: [other](../other.md#sec-1 "Other page"), home [home](../index.md),
this page [here](#here), a file [table](../data/table.tsv), away
[Keras](https://keras.io/) and [mail](mailto:a@b.org).

![a plot](../images/a.png) ![a drawing](../images/b.svg)

Code stays: `[x](../other.md)` and ``![y](../images/a.png)``.

```text
[z](../other.md) ![w](img/a.png)
```

```python
print(1)
```

Again ![the same plot](../images/a.png), ![another a.png](img/a.png) and [gone](missing.md).
"""


def test_links_become_site_urls_and_images_attachments(tmp_path, caplog):
    png_a = (DOCS / "images" / "causal_mask.png").read_bytes()
    png_b = (DOCS / "images" / "positional_encoding.png").read_bytes()
    files = small_site(tmp_path / "docs", {
        "index.md": "# Home\n", "other.md": "# Other\n", "sub/page.md": SUB_PAGE,
        "data/table.tsv": "a\tb\n", "images/a.png": png_a, "sub/img/a.png": png_b,
        "images/b.svg": '<svg xmlns="http://www.w3.org/2000/svg"/>\n'})
    with caplog.at_level(logging.WARNING, logger="mkdocs.hooks.notebooks"):
        notebook = hook.page_notebook(SUB_PAGE, "sub/page.md", files, "https://example.org/docs/")
    first, code, last = notebook.cells
    assert code.source == "print(1)" and "attachments" not in code
    assert "[`sub/page.md`](https://example.org/docs/sub/page/) of the kerasseq" in first.source
    assert first.source.split("*\n\n", 1)[1] == """Up: [other](https://example.org/docs/other/#sec-1 "Other page"), \
home [home](https://example.org/docs/),
this page [here](https://example.org/docs/sub/page/#here), a file \
[table](https://example.org/docs/data/table.tsv), away
[Keras](https://keras.io/) and [mail](mailto:a@b.org).

![a plot](attachment:a.png) ![a drawing](https://example.org/docs/images/b.svg)

Code stays: `[x](../other.md)` and ``![y](../images/a.png)``.

```text
[z](../other.md) ![w](img/a.png)
```"""  # (a backslash at a line's end joins it to the next: the page's lines)
    assert last.source == ("Again ![the same plot](attachment:a.png), ![another a.png]"
                           "(attachment:a-2.png) and [gone](missing.md).")
    encoded = {name: base64.b64encode(data).decode() for name, data in
               (("a", png_a), ("b", png_b))}
    assert first.attachments == {"a.png": {"image/png": encoded["a"]}}
    assert last.attachments == {"a.png": {"image/png": encoded["a"]},
                                "a-2.png": {"image/png": encoded["b"]}}
    assert [record.getMessage() for record in caplog.records] == [
        "notebooks: sub/page.md links to 'missing.md', which is not a file of the site; "
        "the notebook keeps the relative link"]
    nbformat.validate(notebook)


def test_an_image_linked_to_its_full_size_is_embedded(tmp_path):
    """`[![alt](a.png)](a.png)` (a figure linked to its full size): the image
    becomes an attachment, the link the file's site address."""
    png = (DOCS / "images" / "causal_mask.png").read_bytes()
    files = small_site(tmp_path / "docs", {"index.md": "# Home\n", "sub/page.md": "# Page\n",
                                           "images/a.png": png})
    markdown, attachments = hook.standalone_markdown(
        "See [![a grid](../images/a.png)](../images/a.png) and [plain](../index.md).",
        "sub/page.md", files, "https://example.org/docs/")
    assert markdown == ("See [![a grid](attachment:a.png)](https://example.org/docs/images/a.png)"
                        " and [plain](https://example.org/docs/).")
    assert attachments == {"a.png": {"image/png": base64.b64encode(png).decode()}}


def test_on_files_needs_a_site_url(tmp_path):
    from mkdocs.exceptions import PluginError

    files = small_site(tmp_path / "docs", {"t.md": "# T\n\n```python\nprint(1)\n```\n"})
    with pytest.raises(PluginError, match="sets no site_url"):
        hook.on_files(files, {"site_url": None})


def test_site_url_is_where_mkdocs_serve_serves(monkeypatch):
    """Nothing publishes the site: by default the notebooks' links lead to the
    address `mkdocs serve` serves it at (its own default `dev_addr`), and
    KERASSEQ_DOCS_URL names another one."""
    from mkdocs.config import load_config

    monkeypatch.delenv("KERASSEQ_DOCS_URL", raising=False)
    config = load_config(str(ROOT / "mkdocs.yml"))
    host, port = config["dev_addr"]
    assert config["site_url"] == f"http://{host}:{port}/"
    monkeypatch.setenv("KERASSEQ_DOCS_URL", "https://example.org/kerasseq/")
    assert load_config(str(ROOT / "mkdocs.yml"))["site_url"] == "https://example.org/kerasseq/"


def test_first_cell_says_where_the_links_lead(tmp_path):
    files = small_site(tmp_path / "docs", {"t.md": "# T\n\n```python\nprint(1)\n```\n"})
    text = "# T\n\n```python\nprint(1)\n```\n"
    local = hook.page_notebook(text, "t.md", files, "http://127.0.0.1:8000/").cells[0].source
    assert local.endswith("Its links lead to the documentation site at <http://127.0.0.1:8000/>"
                          " (`.venv/bin/mkdocs serve` in a checkout serves it there).*\n")
    elsewhere = hook.page_notebook(text, "t.md", files, "https://example.org/d/").cells[0].source
    assert elsewhere.endswith("Its links lead to the documentation site at "
                              "<https://example.org/d/>.*\n")


def test_notebooks_work_downloaded_alone():
    from PIL import Image

    _, site_url = site()
    figures = {}
    for page in ALL_PAGES:
        notebook = notebook_of(page)
        if notebook is None:
            continue
        shown = []
        for number, cell in enumerate(notebook.cells, start=1):
            where = f"{page_id(page)}, cell {number}"
            if cell.cell_type != "markdown":
                assert "attachments" not in cell, where
                continue
            links, images, raw = markdown_targets(cell.source)
            assert not [fragment for fragment in raw if "src=" in fragment or "href=" in fragment]
            for href in links:
                assert urlsplit(href).scheme in ("https", "http", "mailto"), (
                    f"{where}: relative link {href!r}")
                assert not (href.startswith(site_url) and ".md" in href), f"{where}: {href!r}"
            attachments = cell.get("attachments", {})
            assert all(src.startswith("attachment:") for src in images), f"{where}: {images}"
            names = [src.removeprefix("attachment:") for src in images]
            assert sorted(set(names)) == sorted(attachments), f"{where}: {names} {list(attachments)}"
            for name, bundle in attachments.items():
                assert list(bundle) == ["image/png"], f"{where}: {name}"
                data = base64.b64decode(bundle["image/png"], validate=True)
                with Image.open(io.BytesIO(data)) as image:
                    assert image.format == "PNG", f"{where}: {name}"
                    image.verify()
            shown += [base64.b64decode(attachments[name]["image/png"]) for name in names]
        # The images of the page itself, read from docs/, in the page's order.
        _, page_images, _ = markdown_targets(page.read_text(encoding="utf-8"))
        assert shown == [(page.parent / src).read_bytes() for src in page_images], page_id(page)
        figures[page_id(page)] = len(shown)
    assert figures["tutorial_bible.md"] >= 4 and sum(figures.values()) >= 14, figures


class _Ids(html.parser.HTMLParser):
    """Every `id` attribute of an HTML page: the anchors a link can name."""

    def __init__(self):
        super().__init__()
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        self.ids.update(value for name, value in attrs if name == "id")


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    pytest.importorskip("material", reason="mkdocs-material is not installed")
    site_dir = tmp_path_factory.mktemp("notebook_site") / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--no-strict", "--quiet", "--site-dir",
         str(site_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, f"mkdocs build failed:\n{result.stdout}\n{result.stderr}"
    yield site_dir
    shutil.rmtree(site_dir, ignore_errors=True)


def test_built_notebooks_link_to_pages_and_anchors_of_the_site(built_site):
    from urllib.parse import unquote

    _, site_url = site()
    built = sorted(built_site.rglob("*.ipynb"))
    pages = {hook.notebook_uri(page_id(page)): page for page in ALL_PAGES
             if notebook_of(page) is not None}
    assert sorted(path.relative_to(built_site).as_posix() for path in built) == sorted(pages)
    anchors, checked = {}, 0
    for path in built:
        uri = path.relative_to(built_site).as_posix()
        notebook = notebook_of(pages[uri])
        assert path.read_text(encoding="utf-8") == nbformat.writes(notebook), uri
        for cell in notebook.cells:
            if cell.cell_type != "markdown":
                continue
            for href in markdown_targets(cell.source)[0]:
                if not href.startswith(site_url):
                    continue
                parts = urlsplit(href[len(site_url):])
                target = built_site / unquote(parts.path)
                if parts.path in ("", "./") or parts.path.endswith("/"):
                    target = target / "index.html"
                assert target.is_file(), f"{uri}: {href} names no file of the built site"
                if parts.fragment:
                    if target not in anchors:
                        reader = _Ids()
                        reader.feed(target.read_text(encoding="utf-8"))
                        anchors[target] = reader.ids
                    assert unquote(parts.fragment) in anchors[target], (
                        f"{uri}: {href}: {target.relative_to(built_site)} has no such anchor")
                checked += 1
    assert checked >= 200, checked


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
    notebook = hook.page_notebook(text, page_id(EXECUTED_PAGE), *site())
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
