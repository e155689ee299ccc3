"""Decoders driven by the step contract `step_fn(token_ids, state, step)`.

`greedy`, `beam_search` and `sample` are each one `tf.while_loop` over the
contract: inside a `tf.function` they become part of the caller's graph
(`kerasseq.Translator` compiles, buckets and counts traces), called eagerly
they run as a `tf.function` of their own. They import no model code: any
object that provides a step function and an initial state dict can be
decoded. `Seq2SeqDecodable` is the contract (`encode` / `decode_step`) as a
`typing.Protocol`; `SearchConfig` checks every search setting.

Common arguments. Every decoder takes these (each says what it adds):

- `step_fn(token_ids, state, step) -> (logits, new_state)`, the step
  contract (a model's `decode_step`): `token_ids` int32 `(batch_size,)`,
  `step` an int32 scalar tensor (0 when the start token is fed), `logits`
  `(batch_size, vocab_size)` unnormalised, `new_state` with the keys, shapes
  and dtypes of `state`.
- `state`: flat dict `{str: tensor}`, every tensor with `batch_size` rows,
  typically the output of the model's `encode`.
- `batch_size`: Python int, rows in `state`, or `None` to read the number
  of rows from the state tensors at run time. Use `None` inside a
  `tf.function` traced with an unknown batch size (a SavedModel signature,
  for instance).
- `start_id`: int, token fed at step 0; `end_id`: int, token that ends a
  hypothesis.
- `max_length`: int >= 1, the most steps run (and tokens generated, counting
  the end token); `min_length`: int in `[0, max_length]`, the end token gets
  probability zero until `min_length` tokens were generated (the returned
  log-probabilities are not renormalised for that ban).
- `jit_compile`: bool, compile the loop with XLA. The loop is one
  `tf.while_loop`: inside a `tf.function` (yours, or the one
  `kerasseq.Translator` compiles) it becomes part of that graph; called
  eagerly it runs as a `tf.function` traced for this call alone (no cache:
  to decode many batches, call the decoder inside your own `tf.function`,
  which TensorFlow reuses for every state of the same shape; with
  `batch_size=None` and an input signature whose batch axis is `None`, one
  graph serves every batch size).
- `batch_buckets`: deprecated and ignored (a `DeprecationWarning`):
  `kerasseq.Translator` pads batches to buckets.

Common results: `(token_ids, scores, lengths)`, with a leading
`(batch_size,)` (greedy, sample) or `(batch_size, num_return)` (beam):
int32 `token_ids` `(..., max_length)`, the generated tokens without the end
token, 0 at positions `>= lengths`; float32 `scores`, the model's
log-probabilities of the generated tokens summed, the end token included
when it was emitted (beam search ranks by penalised scores, see
`beam_search`); int32 `lengths`, tokens generated before the end token
(`max_length` if none was emitted).
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
