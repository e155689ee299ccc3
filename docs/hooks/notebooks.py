"""MkDocs hook: every page whose Python the docs tests run is also a Jupyter notebook.

keras.io's examples and TensorFlow's tutorials come as notebooks a reader can
open and run; so do these pages. At build time this hook

- writes, next to each such page's source in the site, a notebook made from
  the page itself (`components/lstm_encoder.md` ->
  `components/lstm_encoder.ipynb`): nothing is committed, nothing is edited by
  hand, and the notebook is never older than the page;
- puts a "Download as a notebook" link under the page's title
  (`on_page_markdown`, so no page source carries it). The link is an ordinary
  relative link to a file of the site, checked by `mkdocs build --strict`
  and working offline.

A notebook is downloaded alone, so it refers to nothing beside it: every
relative link of the page (`loss.md#the-gradient-p-onehot`,
`../images/causal_mask.png`, `#a-heading`) becomes the absolute address of
that file in the site, `site_url` of mkdocs.yml plus the file's URL in the
site (`http://127.0.0.1:8000/loss/#the-gradient-p-onehot`; the anchor is
kept). Nothing publishes the site: `site_url` is where `mkdocs serve` serves
it on the reader's machine (and `mkdocs serve` gives the notebooks it serves
its own address), so the links work offline while the reader serves the
docs; the notebook's first cell says so. Every PNG image the page shows (`![...](images/x.png)`) is
embedded in its Markdown cell as a Jupyter attachment
(`![...](attachment:x.png)`, the file's bytes base64-encoded in the cell's
`attachments`; an image of another type gets its site address). Links and images inside code (fenced blocks, code spans)
are left as they are; a relative link to a file the site does not have is
left too, with a warning (which fails a `--strict` build).

Which pages, which code: the rule of tests/test_docs.py. A page gets a
notebook when it has a fenced ```python / ```py / ```pycon block (fence
indented at most 3 spaces) and is not marked `<!-- docs-test: skip -->`.
Those blocks, in page order, are the notebook's only code cells:

- a plain block is one code cell; the block right after it, if its info
  string has `title="Output"` (the output tests/test_docs.py checks), is
  stored as that cell's output (stdout) and leaves the prose, so the notebook
  opens looking like the page and running it replaces the page's output with
  the reader's own;
- a doctest block (`>>>`) is one code cell per example, without the prompts;
  the expected value becomes the cell's result (printed text when the example
  is a `print(...)`), an expected exception an error output, with the cell
  tagged `raises-exception` so that "Run all" goes on past it.

Everything else is a Markdown cell: the prose with its math and tables, and
every other fenced block (shell commands, ```mermaid diagrams, text) as a
code block in the Markdown. Jupyter has no admonitions, so `!!! note "T"`
becomes a block quote headed **T**. Cell ids are numbered, so a rebuild of an
unchanged page writes the same file.

The conversion itself is jupytext's (`jupytext.reads(..., fmt="md")`): the
hook only marks up the page for it first (executed blocks as plain ```python
fences, every other fenced block inside `<!-- #region -->` so that it stays
Markdown) and, once jupytext has made the cells, stores the outputs and
joins the Markdown cells that the regions split. Fenced blocks are found with
markdown-it-py, jupytext's own Markdown parser. tests/test_docs_notebooks.py
checks, page by page, that the code cells are exactly the blocks
tests/test_docs.py runs and that no link or image is left relative, checks
the built site's notebooks' links against its pages and anchors, and runs
one notebook with a Jupyter kernel.
"""

import ast
import base64
import doctest
import logging
import posixpath
import re
from pathlib import PurePosixPath
from urllib.parse import unquote, urljoin, urlsplit

import jupytext
import nbformat
from markdown_it import MarkdownIt
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, InclusionLevel

log = logging.getLogger("mkdocs.hooks.notebooks")

# As tests/test_docs.py: the languages whose blocks run, the page markers, the
# title of an output block, and a fence (at most 3 spaces of indentation).
EXECUTED_LANGUAGES = ("python", "py", "pycon")
SKIP_MARKER = "<!-- docs-test: skip -->"
NEEDS_COMMAND = re.compile(r"<!-- docs-test: needs-command (\S+) -->")
OUTPUT_TITLE = 'title="Output"'
FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})")

# jupytext's Markdown format; comment_magics off: a `# !...` or `# %...`
# comment of the page stays a comment in the notebook.
JUPYTEXT_FORMAT = {"extension": ".md", "format_name": "markdown", "comment_magics": False}
REGION_START, REGION_END = "<!-- #region -->", "<!-- #endregion -->"

# `!!! note "Title"` (or `???` / `???+`, collapsible), its body indented by 4.
ADMONITION = re.compile(r'^(?:!!!|\?\?\?\+?)\s+([\w-]+)(?:\s+"(.*)")?\s*$')

# An inline link or image, [text](destination "title") or ![alt](...); the text
# may hold brackets one level deep ([`x[0]`](...)).
LINK = re.compile(r'(?P<image>!?)\[(?:[^\[\]]|\[[^\[\]]*\])*\]'
                  r'\((?P<destination><[^<>\n]*>|[^\s()<>]+)(?:\s+"[^"\n]*")?\)')
# A code span: a run of backticks up to the next run of the same length.
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# Images embedded as attachments (every figure of the docs is a PNG); an image
# of another type keeps a link to the site (JupyterLab draws an attachment
# from base64 only for raster types, not SVG).
ATTACHED_TYPES = {".png": "image/png"}

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
LINK_TEXT = "Download as a notebook"


def notebook_uri(page_uri):
    """`components/lstm_encoder.md` -> `components/lstm_encoder.ipynb`."""
    return PurePosixPath(page_uri).with_suffix(".ipynb").as_posix()


def executed_fences(text):
    """The fenced blocks tests/test_docs.py sees, as markdown-it tokens, in page order."""
    lines = text.splitlines()
    return [
        token for token in MarkdownIt("commonmark").parse(text)
        if token.type == "fence" and token.map and FENCE_LINE.match(lines[token.map[0]])
    ]


def _language(info):
    """The language of a fence's info string, read as tests/test_docs.py reads it."""
    return info.split()[0].lstrip(".{") if info.strip() else ""


def _is_doctest(source):
    first = next((line for line in source.splitlines() if line.strip()), "")
    return first.lstrip().startswith(">>>")


def _shows_value(source):
    """True when Jupyter would show `source`'s last line as the cell's result."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    last = body[-1] if body else None
    if not isinstance(last, ast.Expr):
        return False
    call = last.value
    return not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "print")


def _output(output_type, **fields):
    """A cell output. nbformat.v4.new_output would validate each one against the
    schema, slowly; the whole notebook is validated once at the end."""
    return nbformat.from_dict({"output_type": output_type, **fields})


def _doctest_cells(source):
    """`[(code, outputs, tags), ...]`: one cell per example of a doctest block."""
    cells = []
    for example in doctest.DocTestParser().get_examples(source):
        outputs, tags = [], []
        if example.exc_msg is not None:
            name, _, value = example.exc_msg.strip().partition(":")
            outputs.append(_output(
                "error", ename=name.strip(), evalue=value.strip(),
                traceback=example.want.rstrip("\n").splitlines()))
            tags.append("raises-exception")
        elif example.want and _shows_value(example.source):
            outputs.append(_output(
                "execute_result", data={"text/plain": example.want.rstrip("\n")},
                metadata={}, execution_count=None))
        elif example.want:
            outputs.append(_output("stream", name="stdout", text=example.want))
        cells.append((example.source, outputs, tags))
    return cells


def _code_fence(code):
    """`code` as a ```python fence, with more backticks than any line of it starts with."""
    runs = [len(line) - len(line.lstrip("`")) for line in code.splitlines()]
    ticks = "`" * max(3, max(runs, default=0) + 1)
    return [f"{ticks}python", *code.rstrip("\n").splitlines(), ticks, ""]


def _prose(lines):
    """Markdown lines as Jupyter shows them: admonitions become block quotes."""
    result, index = [], 0
    while index < len(lines):
        match = ADMONITION.match(lines[index])
        if match is None:
            result.append(lines[index])
            index += 1
            continue
        kind, title = match[1], match[2]
        index += 1
        body = []
        while index < len(lines) and (not lines[index].strip() or lines[index].startswith("    ")):
            body.append(lines[index][4:])
            index += 1
        while body and not body[-1].strip():
            body.pop()
        while body and not body[0].strip():
            body.pop(0)
        heading = [] if title == "" else [f"**{title or kind.capitalize()}**", ""]
        result.extend(f"> {line}".rstrip() for line in heading + body)
        result.append("")
    return result


def _intro(page_uri, text, site_url):
    needs = "".join(
        f" It also needs the program `{program}` (`make examples-data`)."
        for program in NEEDS_COMMAND.findall(text)
    )
    host = urlsplit(site_url).hostname
    where = (" (`.venv/bin/mkdocs serve` in a checkout serves it there)"
             if host in ("127.0.0.1", "localhost", "::1") else "")
    return [
        "",
        f"*This notebook is the page [`{page_uri}`]({PurePosixPath(page_uri).name}) "
        "of the kerasseq documentation, made "
        "from it when the site was built: its code cells are the page's code, in "
        "order, and the outputs stored under them are the ones the page shows. "
        "It needs kerasseq installed (`pip install -e .` in a checkout of the "
        f"repository).{needs} Its links lead to the documentation site at "
        f"<{site_url}>{where}.*",
        "",
    ]


def _code_masked(markdown):
    """`markdown` with its code (fenced and indented blocks, code spans) blanked
    out by NUL characters: the same length, so offsets in it are offsets in
    `markdown`."""
    line_starts = [0] + [match.end() for match in re.finditer("\n", markdown)]
    line_starts.append(len(markdown))
    masked = list(markdown)
    for token in MarkdownIt("commonmark").parse(markdown):
        if token.type in ("fence", "code_block") and token.map:
            first, last = token.map
            for index in range(line_starts[first], line_starts[min(last, len(line_starts) - 1)]):
                masked[index] = "\0"
    return CODE_SPAN.sub(lambda match: "\0" * len(match[0]), "".join(masked))


def _site_file(destination, page_uri, files):
    """`(File, fragment)` that a relative link of the page `page_uri` names, or
    `(None, None)` for an absolute one (`https:`, `mailto:`, `/...`)."""
    if destination.startswith("<"):
        destination = destination[1:-1]
    if SCHEME.match(destination) or destination.startswith("/"):
        return None, None
    path, _, fragment = destination.partition("#")
    target = page_uri if not path else posixpath.normpath(
        posixpath.join(posixpath.dirname(page_uri), unquote(path)))
    return files.get_file_from_path(target), fragment


def _attachment_name(file, attached):
    """A name for `file` among the cell's attachments `attached` (`{name: src_uri}`)."""
    stem, suffix = posixpath.splitext(posixpath.basename(file.src_uri))
    name, number = stem + suffix, 1
    while attached.get(name, file.src_uri) != file.src_uri:
        number += 1
        name = f"{stem}-{number}{suffix}"
    attached[name] = file.src_uri
    return name


def standalone_markdown(markdown, page_uri, files, site_url):
    """`(markdown, attachments)`: a Markdown cell of the page `page_uri` made to
    work without the site beside it.

    Relative links become `site_url` plus the file's URL in the site (`files`,
    the build's `mkdocs.structure.files.Files`), anchors kept; images of the
    types in ATTACHED_TYPES become `attachment:NAME`, and `attachments` is the
    cell's `{NAME: {mime type: base64 of the file}}` (empty when it shows none).
    Code is left alone; a link to a file that `files` lacks is left, with a warning.
    An image inside a link's text (`[![alt](a.png)](a.png)`, a figure linked to
    its full size) is embedded too.
    """
    attachments, attached = {}, {}

    def rewrite(markdown):
        masked = _code_masked(markdown)
        pieces, cursor = [], 0
        for match in LINK.finditer(masked):
            start, end = match.span("destination")
            if not match["image"]:  # the link's text may show an image
                text_start, text_end = match.start() + 1, start - 2
                pieces += [markdown[cursor:text_start], rewrite(markdown[text_start:text_end])]
                cursor = text_end
            destination = markdown[start:end]
            file, fragment = _site_file(destination, page_uri, files)
            if file is None:
                if fragment is not None:
                    log.warning("notebooks: %s links to %r, which is not a file of the site; "
                                "the notebook keeps the relative link", page_uri, destination)
                continue
            mime = ATTACHED_TYPES.get(posixpath.splitext(file.src_uri)[1].lower())
            if match["image"] and mime is not None:
                name = _attachment_name(file, attached)
                attachments[name] = {mime: base64.b64encode(file.content_bytes).decode("ascii")}
                new = f"attachment:{name}"
            else:
                new = urljoin(site_url, file.url) + (f"#{fragment}" if fragment else "")
            pieces += [markdown[cursor:start], new]
            cursor = end
        pieces.append(markdown[cursor:])
        return "".join(pieces)

    return rewrite(markdown), attachments


def page_notebook(text, page_uri, files, site_url):
    """The notebook of the page `text` (its path in docs/: `page_uri`), or None.

    None when the page has no block that tests/test_docs.py runs (see the
    module docstring). `files` (the build's `Files`) and `site_url` (absolute,
    ending in "/") turn its links and images into ones that work in a
    notebook downloaded alone (`standalone_markdown`).
    """
    if SKIP_MARKER in text:
        return None
    lines = text.splitlines()
    fences = executed_fences(text)
    marked, cells, cursor, paired = [], [], 0, set()
    for position, fence in enumerate(fences):
        start, end = fence.map
        marked += _prose(lines[cursor:start])
        cursor = end
        if position in paired:
            continue  # an output block, now the output of the code cell above it
        if _language(fence.info) not in EXECUTED_LANGUAGES:
            marked += [REGION_START, *lines[start:end], REGION_END]
            continue
        following = fences[position + 1] if position + 1 < len(fences) else None
        expected = None
        if following is not None and OUTPUT_TITLE in following.info:
            expected = following.content
            paired.add(position + 1)
        if _is_doctest(fence.content):
            block_cells = _doctest_cells(fence.content)
        else:
            outputs = [] if expected is None else [
                _output("stream", name="stdout", text=expected)]
            block_cells = [(fence.content, outputs, [])]
        for code, _, _ in block_cells:
            marked += _code_fence(code)
        cells += block_cells
    marked += _prose(lines[cursor:])
    if not cells:
        return None

    title = 1 if marked and marked[0].startswith("# ") else 0
    marked[title:title] = _intro(page_uri, text, site_url)
    notebook = jupytext.reads("\n".join(marked) + "\n", fmt=JUPYTEXT_FORMAT)

    merged = []
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            if not cell.source.strip():
                continue
            if merged and merged[-1].cell_type == "markdown":
                merged[-1].source = merged[-1].source.rstrip("\n") + "\n\n" + cell.source
                continue
            cell.metadata = {}
        merged.append(cell)
    code_cells = [cell for cell in merged if cell.cell_type == "code"]
    if len(code_cells) != len(cells):
        raise ValueError(f"{page_uri}: jupytext made {len(code_cells)} code cells "
                         f"of {len(cells)} python blocks / doctest examples")
    for cell, (_, outputs, tags) in zip(code_cells, cells, strict=True):
        cell.metadata = {"tags": tags} if tags else {}
        cell.outputs = outputs
        cell.execution_count = None
    for number, cell in enumerate(merged, start=1):
        cell.id = f"cell-{number}"
        if cell.cell_type == "markdown":
            cell.source, attachments = standalone_markdown(cell.source, page_uri, files, site_url)
            if attachments:
                cell.attachments = attachments

    notebook.cells = merged
    notebook.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    notebook.nbformat, notebook.nbformat_minor = 4, 5
    nbformat.validate(notebook)
    return notebook


def on_files(files, config):
    site_url = config.get("site_url")
    if not site_url:
        raise PluginError(
            "docs/hooks/notebooks.py: mkdocs.yml sets no site_url. The notebooks' links point "
            "at the published site, so they need its address (site_url: https://...).")
    made = 0
    for page in list(files.documentation_pages()):
        notebook = page_notebook(page.content_string, page.src_uri, files, site_url)
        if notebook is None:
            continue
        uri = notebook_uri(page.src_uri)
        existing = files.get_file_from_path(uri)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, uri, content=nbformat.writes(notebook),
                                    inclusion=InclusionLevel.NOT_IN_NAV))
        made += 1
    log.info("notebooks: %d pages also written as .ipynb", made)
    return files


def on_page_markdown(markdown, page, config, files):
    """Put the link to the page's notebook under its title."""
    uri = notebook_uri(page.file.src_uri)
    if files.get_file_from_path(uri) is None:
        return markdown
    name = PurePosixPath(uri).name
    link = ["", f'[{LINK_TEXT}]({name}){{ download="{name}" }}', ""]
    lines = markdown.split("\n")
    title = 1 if lines and lines[0].startswith("# ") else 0
    lines[title:title] = link
    return "\n".join(lines)
