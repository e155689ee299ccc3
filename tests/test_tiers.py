"""The list of repetitions moved out of `make test` (tests/conftest.py) names tests that exist."""

import ast
import os

from tests.conftest import SLOW_REPETITIONS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_slow_repetition_names_a_test_function():
    missing = []
    for nodeid in SLOW_REPETITIONS:
        path, name = nodeid.split("[")[0].split("::")
        with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        if name not in names:
            missing.append(nodeid)
    assert not missing, missing
