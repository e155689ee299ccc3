"""The decoding contract every searchable model meets, as a `typing.Protocol`.

docs/design.md: a model (or an ensemble of models) is searchable when it has

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

Two state keys have a meaning for the searches (one definition, used by the
searches and by the models that write them): `ATTENTION_WEIGHTS`, this
step's cross-attention `(batch_size, source_length)` (beam search's coverage
penalty), and `SOURCE_MASK`, the real source positions `(batch_size,
source_length)`.

`OPTIONAL_ATTRIBUTES` lists every other attribute or hook of a model that
`kerasseq.Translator` reads (through `optional`), so this module holds the
whole contract between the translator and a model.
"""

import inspect
from typing import Any, Dict, Protocol, Tuple, runtime_checkable

State = Dict[str, Any]

ATTENTION_WEIGHTS = "attention_weights"
SOURCE_MASK = "source_mask"

# Every optional attribute the translator reads, with what it means (see
# `Seq2SeqDecodable`); `optional` refuses any other name.
OPTIONAL_ATTRIBUTES = {
    "source_tokenizer": "tokenizer of the source text (translate, exports)",
    "target_tokenizer": "tokenizer of the target text (translate, exports)",
    "start_id": "token fed at step 0 (default 2, kerasseq.data's START_ID)",
    "end_id": "token that ends a hypothesis (default 3, kerasseq.data's END_ID)",
    "max_target_length": "default max_length of a search",
    "max_positions": "a position table: most source tokens the model reads",
    "source_vocab_size": "source ids are checked against it",
    "source_length_multiple": "source columns are padded to multiples of it (default 8)",
    "check_search_config": "check_search_config(config): model-specific checks",
    "shared_state_keys": "state tensors beam search keeps one copy of per source",
    "trim_source_ids": "trim_source_ids(ids) -> ids: cut sources to what the model reads",
    "translator_cache": "a dict in which get_translator keeps the model's translators",
}


def optional(model, name, default=None):
    """`model.<name>`, an attribute of `OPTIONAL_ATTRIBUTES`, or `default`."""
    if name not in OPTIONAL_ATTRIBUTES:
        raise KeyError(f"{name!r} is not an attribute of the decoding contract "
                       f"(kerasseq.decoding.contract.OPTIONAL_ATTRIBUTES)")
    return getattr(model, name, default)


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

    Optional attributes, read when present: `OPTIONAL_ATTRIBUTES`, the one
    list. What it leaves out: `decode_step` accepts the `shared_state_keys`
    tensors untiled, one row per source (`beam_search(shared_state=...)`);
    `trim_source_ids` may raise, and gets NumPy ids eagerly and int32 tensors
    inside an export's graph; without `translator_cache` every call builds a
    new `Translator`.

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
