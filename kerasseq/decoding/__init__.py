"""Decoders driven by the step contract `step_fn(token_ids, state, step)`.

`greedy`, `beam_search` and `sample` are each one `tf.while_loop` over the
contract: inside a `tf.function` they become part of the caller's graph
(`kerasseq.Translator` compiles, buckets and counts traces), called eagerly
they run as a `tf.function` of their own. They import no model code: any
object that provides a step function and an initial state dict can be
decoded. `Seq2SeqDecodable` is the contract (`encode` / `decode_step`) as a
`typing.Protocol`; `SearchConfig` checks every search setting.
"""

import warnings

from kerasseq.decoding.beam_search import beam_search
from kerasseq.decoding.config import SearchConfig
from kerasseq.decoding.contract import Seq2SeqDecodable, encode_for_search
from kerasseq.decoding.greedy import greedy
from kerasseq.decoding.sampling import sample

__all__ = [
    "SearchConfig",
    "Seq2SeqDecodable",
    "beam_search",
    "encode_for_search",
    "greedy",
    "sample",
]

# Deprecated names (one release): the decoders no longer cache compiled
# functions or pad batches; kerasseq.Translator does.
_DEPRECATED = {
    "trace_count": "Translator.trace_count (or tf.function.experimental_get_tracing_count())",
    "clear_cache": "nothing (the decoders keep no compiled functions)",
    "bucket_size": "kerasseq.translator.bucket_size",
    "pad_state": "kerasseq.translator.pad_rows",
}


def __getattr__(name):
    if name not in _DEPRECATED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"kerasseq.decoding.{name} is deprecated; use {_DEPRECATED[name]}.",
                  DeprecationWarning, stacklevel=2)
    return globals()["_deprecated_" + name]


def _deprecated_trace_count(kind=None):
    """Decoder loops traced by direct `greedy` / `beam_search` / `sample` calls."""
    from kerasseq.decoding._common import _LOOPS_BUILT

    return sum(_LOOPS_BUILT.values()) if kind is None else _LOOPS_BUILT[kind]


def _deprecated_clear_cache():
    """Nothing to clear: the decoders keep no compiled functions."""


def _deprecated_bucket_size(batch_size, buckets="pow2"):
    from kerasseq.translator import bucket_size

    return bucket_size(batch_size, buckets)


def _deprecated_pad_state(state, batch_size, padded_batch_size):
    import tensorflow as tf

    from kerasseq.translator import pad_rows

    del batch_size  # read from the tensors
    return {name: pad_rows(tf.convert_to_tensor(tensor), padded_batch_size)
            for name, tensor in state.items()}
