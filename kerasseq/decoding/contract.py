"""The decoding contract every searchable model meets, as a `typing.Protocol`.

DESIGN §3: a model (or an ensemble of models) is searchable when it has

* `encode(source_ids) -> state`: `source_ids` int `(batch_size,
  source_length)`, 0 = padding; `state` a flat dict of tensors, batch axis
  first (encoder outputs, source mask, recurrent state, key/value caches
  preallocated to the longest target). `encode` may take an optional
  keyword `max_length`, the most tokens the search will generate (the
  Transformer sizes its self-attention cache to it; see `encode_for_search`);
* `decode_step(token_ids, state, step) -> (logits, state)`: `token_ids` int32
  `(batch_size,)`, `step` an int32 scalar tensor, `logits` float
  `(batch_size, target_vocab_size)`, and the new state with the keys, shapes
  and dtypes of `state`.

The searches in `kerasseq.decoding` take `model.decode_step` and the state of
`model.encode` and know nothing else; `kerasseq.Translator` adds tokenizers,
batching and the compiled function around them.
"""

import inspect
from typing import Any, Dict, Protocol, Tuple, runtime_checkable

State = Dict[str, Any]


def encode_accepts_max_length(model):
    """Whether `model.encode` takes the optional `max_length` keyword (see below)."""
    try:
        parameters = inspect.signature(model.encode).parameters
    except (TypeError, ValueError):
        return False
    return "max_length" in parameters or any(
        parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values())


def encode_for_search(model, source_ids, max_length):
    """`model.encode(source_ids, max_length=max_length)` where the model takes it, else
    `model.encode(source_ids)`.

    `max_length` is the most target tokens the search will generate: a model
    that preallocates a key/value cache (the Transformer) sizes it to that
    instead of its whole position table, so each step attends over, and beam
    search reorders, only the positions the search can fill.
    """
    if encode_accepts_max_length(model):
        return model.encode(source_ids, max_length=max_length)
    return model.encode(source_ids)


@runtime_checkable
class Seq2SeqDecodable(Protocol):
    """What `kerasseq.Translator`, `export_translator` and the searches need.

    Optional attributes, read when present: `source_tokenizer` /
    `target_tokenizer` (text in and out), `start_id` / `end_id` (default 2
    and 3), `max_target_length` (default `max_length` of a search),
    `source_vocab_size` (id checks), `source_length_multiple` (column
    bucket, default 8), `check_search_config(config)` (model-specific
    checks of a `SearchConfig`) and `shared_state_keys` (state tensors that
    are the same for every hypothesis of a source and that `decode_step`
    accepts untiled, with one row per source: beam search then keeps one
    copy of them, see `beam_search(shared_state=...)`).

    Example:

    >>> from kerasseq.models import build_rnn_seq2seq
    >>> isinstance(build_rnn_seq2seq(10, 10, units=8), Seq2SeqDecodable)
    True
    """

    def encode(self, source_ids: Any) -> State:
        """Source ids `(batch_size, source_length)` → the initial decoding state."""
        ...

    def decode_step(self, token_ids: Any, state: State, step: Any) -> Tuple[Any, State]:
        """One target position: `(batch_size,)` tokens → `(batch_size, vocab_size)` logits."""
        ...
