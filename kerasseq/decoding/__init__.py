"""Decoders driven by the step contract `step_fn(token_ids, state, step)`.

`greedy`, `beam_search` and `sample` each run as one `tf.function` around a
`tf.while_loop`. They import no model code: any object that provides a step
function and an initial state dict can be decoded. `Seq2SeqDecodable` is the
contract (`encode` / `decode_step`) as a `typing.Protocol`.
"""

from kerasseq.decoding._common import bucket_size, clear_cache, pad_state, trace_count
from kerasseq.decoding.beam_search import beam_search
from kerasseq.decoding.contract import Seq2SeqDecodable, encode_for_search
from kerasseq.decoding.greedy import greedy
from kerasseq.decoding.sampling import sample

__all__ = [
    "encode_for_search",
    "Seq2SeqDecodable",
    "beam_search",
    "bucket_size",
    "clear_cache",
    "greedy",
    "pad_state",
    "sample",
    "trace_count",
]
