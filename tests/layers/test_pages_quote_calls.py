"""The Transformer component pages quote their layer's `call` as the code has it.

Each page holds a ```python3 block (not run by the docs tests) titled with the method (e.g. `title="CrossAttention.call
(...)"`) whose text is the method's source, dedented, its docstring left out. The docs test
(tests/test_docs.py) runs the block, which only defines the functions.
"""

import inspect
import re
import textwrap
from pathlib import Path

import pytest

from kerasseq.layers import (
    CausalSelfAttention,
    CrossAttention,
    FeedForward,
    GlobalSelfAttention,
    MultiHeadAttention,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)

COMPONENTS = Path(__file__).resolve().parents[2] / "docs" / "components"
QUOTES = {
    "global_self_attention.md": [GlobalSelfAttention.call],
    "causal_self_attention.md": [CausalSelfAttention.call],
    "cross_attention.md": [CrossAttention.call],
    "feed_forward.md": [FeedForward.call],
    "transformer_encoder_block.md": [TransformerEncoderBlock.call],
    "transformer_decoder_block.md": [TransformerDecoderBlock.call],
    "multi_head_attention.md": [MultiHeadAttention.call, MultiHeadAttention.attend],
}
BLOCK = re.compile(r'^```python3 title="(?P<title>[^"]+)"\n(?P<body>.*?)^```$', re.M | re.S)


def quoted_source(methods):
    """The methods' source, dedented, without docstrings, separated by a blank line."""
    parts = []
    for method in methods:
        source = textwrap.dedent(inspect.getsource(method))
        source = re.sub(r'^(    )"""(?:.|\n)*?"""\n', "", source, count=1, flags=re.M)
        parts.append(source)
    return "\n".join(parts)


@pytest.mark.parametrize("page", sorted(QUOTES))
def test_page_quotes_the_call_of_the_code(page):
    methods = QUOTES[page]
    text = (COMPONENTS / page).read_text(encoding="utf-8")
    name = methods[0].__qualname__
    blocks = [m["body"] for m in BLOCK.finditer(text) if m["title"].startswith(name)]
    assert blocks, f"{page} quotes no block titled {name}"
    assert blocks[0] == quoted_source(methods), f"{page}: the quote of {name} is stale"
    code_lines = [line for line in blocks[0].splitlines()
                  if line.strip() and not line.strip().startswith("#")]
    assert len(code_lines) <= 25 * len(methods), f"{name}: {len(code_lines)} code lines"
