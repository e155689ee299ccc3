"""The reading targets of the components (issue 50) hold, and docs/design.md prints today's table."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _component_lines():
    path = os.path.join(ROOT, "benchmarks", "component_lines.py")
    spec = importlib.util.spec_from_file_location("component_lines", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_component_is_within_its_file_and_line_targets():
    rows = _component_lines().measure()
    over = [(name, files, lines) for name, files, lines, max_files, max_lines, _ in rows
            if files > max_files or lines > max_lines]
    assert not over, over


def test_design_page_prints_the_measured_table():
    with open(os.path.join(ROOT, "docs", "design.md"), encoding="utf-8") as handle:
        page = handle.read()
    for name, files, lines, max_files, max_lines, _ in _component_lines().measure():
        row = f"| {name} | {files} | {lines:,} | ≤ {max_files} | ≤ {max_lines:,} |"
        assert row in page, row
