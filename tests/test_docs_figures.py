"""The documentation's pictures: the figure script and the diagrams.

- `docs/make_figures.py` writes its PNG files into the directory it is given,
  and the data it plots (the positional-encoding table, the warm-up learning
  rate) match the formulas, computed here independently with NumPy.
- Every component page (`docs/components/*.md`) shows at least one picture:
  a ```mermaid diagram or an image whose file exists.
- Every ```mermaid block of the docs starts with a known diagram type and has
  balanced quotes and brackets (a cheap syntax check; drawing them is the
  browser test's job).
"""

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from tests.test_docs import fenced_blocks

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
COMPONENT_PAGES = sorted((DOCS / "components").glob("*.md"))
ALL_PAGES = sorted(DOCS.rglob("*.md"))
FIGURE_FILES = ("positional_encoding.png", "learning_rate_schedule.png")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# The first word of a mermaid diagram (mermaid 10/11 diagram types).
MERMAID_TYPES = (
    "flowchart", "graph", "sequenceDiagram", "classDiagram", "stateDiagram",
    "stateDiagram-v2", "erDiagram", "journey", "gantt", "pie", "quadrantChart",
    "requirementDiagram", "gitGraph", "mindmap", "timeline", "sankey-beta",
    "xychart-beta", "block-beta", "packet-beta", "architecture-beta", "kanban",
)
# Markdown image, `![alt](path)`, optionally followed by attributes.
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)[^)]*\)")


def _load_make_figures():
    spec = importlib.util.spec_from_file_location("make_figures", DOCS / "make_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def make_figures():
    return _load_make_figures()


def _mermaid_blocks(page):
    text = page.read_text(encoding="utf-8")
    return [
        (source, line)
        for info, source, line in fenced_blocks(text)
        if info.split()[:1] == ["mermaid"]
    ]


# ------------------------------------------------------------------ figures
def test_make_figures_writes_the_png_files(make_figures, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    output_dir = tmp_path / "images"
    written = make_figures.main(["--output-dir", str(output_dir)])
    assert sorted(path.name for path in written) == sorted(FIGURE_FILES)
    for name in FIGURE_FILES:
        path = output_dir / name
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC), f"{name} is not a PNG file"
        assert 5_000 < len(data) < 300_000, f"{name}: {len(data)} bytes"
        # Width and height (pixels) from the IHDR chunk: about 7 inches at 100 dpi.
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert 500 <= width <= 900 and 250 <= height <= 600, (name, width, height)
    assert not (tmp_path / "docs").exists()  # nothing written outside --output-dir


def test_positional_encoding_figure_plots_the_sin_cos_table(make_figures):
    length, d_model = 50, 16
    figure, table = make_figures.positional_encoding_figure(length=length, d_model=d_model)
    assert table.shape == (length, d_model)
    # PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same angle).
    expected = np.zeros((length, d_model))
    for pos in range(length):
        for i in range(d_model // 2):
            angle = pos / 10000.0 ** (2 * i / d_model)
            expected[pos, 2 * i] = np.sin(angle)
            expected[pos, 2 * i + 1] = np.cos(angle)
    np.testing.assert_allclose(table, expected, atol=1e-6)
    # What is drawn is that table.
    plotted = np.asarray(figure.axes[0].images[0].get_array())
    np.testing.assert_allclose(plotted, expected, atol=1e-6)


def test_learning_rate_figure_plots_the_warmup_schedule(make_figures):
    settings = ((512, 4000), (128, 1000))
    figure, steps, rates = make_figures.learning_rate_figure(settings=settings, num_steps=12000)
    np.testing.assert_array_equal(steps, np.arange(1, 12001))
    assert rates.shape == (2, 12000)
    for (d_model, warmup), curve in zip(settings, rates, strict=True):
        # lr(step) = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), steps from 1.
        step = steps.astype(np.float64)
        expected = d_model ** -0.5 * np.minimum(step ** -0.5, step * warmup ** -1.5)
        np.testing.assert_allclose(curve, expected, rtol=1e-5)
        assert steps[np.argmax(curve)] == warmup
        np.testing.assert_allclose(curve.max(), (d_model * warmup) ** -0.5, rtol=1e-5)
    lines = [line for line in figure.axes[0].get_lines() if len(line.get_xdata()) > 1]
    assert len(lines) == len(settings)
    for line, curve in zip(lines, rates, strict=True):
        np.testing.assert_allclose(line.get_ydata(), curve)
        np.testing.assert_array_equal(line.get_xdata(), steps)


def test_committed_figures_are_shown_on_their_pages():
    pages = {
        "positional_encoding.png": DOCS / "components" / "positional_embedding.md",
        "learning_rate_schedule.png": DOCS / "components" / "transformer_seq2seq.md",
    }
    for name, page in pages.items():
        assert (DOCS / "images" / name).is_file(), f"run python docs/make_figures.py ({name})"
        assert f"../images/{name}" in page.read_text(encoding="utf-8"), (name, page.name)


# ----------------------------------------------------------------- diagrams
@pytest.mark.parametrize("page", COMPONENT_PAGES, ids=[p.name for p in COMPONENT_PAGES])
def test_every_component_page_has_a_picture(page):
    text = page.read_text(encoding="utf-8")
    images = [target for target in IMAGE.findall(text) if "://" not in target]
    for target in images:
        assert (page.parent / target).resolve().is_file(), f"{page.name}: missing image {target}"
    assert _mermaid_blocks(page) or images, (
        f"{page.relative_to(ROOT)} has neither a ```mermaid diagram nor an image"
    )


def mermaid_problems(source):
    """What is visibly wrong with the text of one mermaid diagram (`[]` if nothing)."""
    lines = [
        text.strip() for text in source.splitlines()
        if text.strip() and not text.strip().startswith("%%")  # %% comments
    ]
    if not lines:
        return ["empty mermaid block"]
    problems = []
    kind = lines[0].split()[0]
    if kind not in MERMAID_TYPES:
        problems.append(f"unknown mermaid diagram type {kind!r}")
    if len(lines) == 1:
        problems.append("a diagram type and nothing else")
    for number, text in enumerate(lines, start=1):
        if text.count('"') % 2:
            problems.append(f"line {number}: unbalanced quote: {text}")
            continue
        outside_quotes = re.sub(r'"[^"]*"', '""', text)
        for opening, closing in ("[]", "()", "{}"):
            if outside_quotes.count(opening) != outside_quotes.count(closing):
                problems.append(f"line {number}: unbalanced {opening}{closing}: {text}")
    if "\t" in source:
        problems.append("tab character")
    return problems


@pytest.mark.parametrize("page", ALL_PAGES, ids=[str(p.relative_to(DOCS)) for p in ALL_PAGES])
def test_mermaid_blocks_parse_trivially(page):
    for source, line in _mermaid_blocks(page):
        problems = mermaid_problems(source)
        assert not problems, f"{page.relative_to(ROOT)}:{line}: " + "; ".join(problems)


def test_the_mermaid_check_catches_mistakes(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('# t\n\n```mermaid\nflowchart LR\n    a["x"] --> b["y]\n```\n', encoding="utf-8")
    [(source, line)] = _mermaid_blocks(page)
    assert line == 4 and source.startswith("flowchart LR")
    assert mermaid_problems(source) == ['line 2: unbalanced quote: a["x"] --> b["y]']
    assert mermaid_problems("flowhcart LR\n    a --> b\n") == [
        "unknown mermaid diagram type 'flowhcart'"
    ]
    assert mermaid_problems("%% a comment\nflowchart LR\n    a[x --> b\n") == [
        "line 2: unbalanced []: a[x --> b"
    ]
    assert mermaid_problems('flowchart LR\n    a["(x"] --> b(("+"))\n') == []
    assert mermaid_problems("sequenceDiagram\n    A->>B: hi\n") == []
