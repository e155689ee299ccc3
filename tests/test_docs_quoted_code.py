"""Code quoted on a page is the code of the package, word for word.

A page quotes a method in a fenced block whose info string is
`python3 title="Class.method (kerasseq/path/module.py)"` (the `python3`
language keeps tests/test_docs.py from running it). Each such block must equal
the method's source as `inspect.getsource` gives it, dedented.
"""

import importlib
import inspect
import re
import textwrap
from pathlib import Path

import pytest

from tests.test_docs import fenced_blocks

DOCS = Path(__file__).resolve().parents[1] / "docs"
QUOTE = re.compile(r'^python3 title="(?P<cls>\w+)\.(?P<method>\w+) \((?P<path>kerasseq/[\w/]+)\.py\)"$')


def quotes():
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        for info, source, line in fenced_blocks(page.read_text(encoding="utf-8")):
            match = QUOTE.match(info.strip())
            if match:
                found.append(pytest.param(match, source, id=f"{page.relative_to(DOCS)}:{line}"))
    return found


@pytest.mark.parametrize("match, quoted", quotes())
def test_quoted_method_is_the_source(match, quoted):
    module = importlib.import_module(match["path"].replace("/", "."))
    method = getattr(getattr(module, match["cls"]), match["method"])
    assert quoted == textwrap.dedent(inspect.getsource(method))


def test_the_recurrent_pages_quote_their_equations():
    pages = {page.stem for param in quotes() for page in [Path(param.id.split(":")[0])]}
    assert {"lstm_encoder", "gru_decoder", "bahdanau_attention", "luong_attention",
            "bridge"} <= pages
