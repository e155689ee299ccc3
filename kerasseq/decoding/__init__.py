"""Decoders driven by the step contract `step_fn(token_ids, state, step)`.

`greedy`, `beam_search` and `sample` are each one `tf.while_loop` over the
contract (how it runs: `jit_compile` below; `kerasseq.Translator` compiles,
buckets and counts traces). They import no model code: any
object that provides a step function and an initial state dict can be
decoded. `Seq2SeqDecodable` is the contract (`encode` / `decode_step`) as a
`typing.Protocol`; `SearchConfig` checks every search setting.

Common arguments. Every decoder takes these (each says what it adds):

- `step_fn(token_ids, state, step) -> (logits, new_state)`, the step
  contract (a model's `decode_step`): `token_ids` int32 `(batch_size,)`,
  `step` an int32 scalar tensor (0 when the start token is fed), `logits`
  `(batch_size, vocab_size)` unnormalised, `new_state` with the keys, shapes
  and dtypes of `state`. It is traced without AutoGraph (as Keras' `fit`
  traces a model's `call`): control flow on tensors is written with
  `tf.cond` / `tf.where` / `keras.ops`, never a Python `if` on a tensor.
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
- `no_repeat_ngram_size`: int n >= 0 (keyword-only), fairseq's n-gram
  blocking: a token that would complete an n-gram already in the generated
  tokens gets probability zero (not renormalised either; beam search: per
  beam; `_common.ban_repeated_ngrams`; 0, the default, turns it off).
- `banned_ids`: sequence of token ids (keyword-only) that are never
  generated, besides padding (0) and `start_id`, which no search ever
  generates (the results are 0-padded, and the start token is only fed); the
  end token is never banned. The ban sets their log-probabilities to `-inf`
  after the `log_softmax` (`_common.log_probs_float32`), as fairseq bans
  padding: the other tokens keep the model's log-probabilities (not
  renormalised, like the two bans above), and the scores and lengths count
  only tokens the text holds. `kerasseq.Translator` adds the
  target tokenizer's `[UNK]` with `SearchConfig.ban_unk`.
- `jit_compile`: bool, compile the loop with XLA (the one description of
  how a decoder runs). Inside a `tf.function` (yours, or the one
  `kerasseq.Translator` compiles) it becomes part of that graph; called
  eagerly it runs as a `tf.function` traced for this call alone (no cache:
  to decode many batches, call the decoder inside your own `tf.function`,
  which TensorFlow reuses for every state of the same shape; with
  `batch_size=None` and an input signature whose batch axis is `None`, one
  graph serves every batch size).

Common results: `(token_ids, scores, lengths)`, with a leading
`(batch_size,)` (greedy, sample) or `(batch_size, num_return)` (beam):
int32 `token_ids` `(..., max_length)`, the generated tokens without the end
token, 0 at positions `>= lengths`; float32 `scores`, the model's
log-probabilities of the generated tokens summed, the end token included
when it was emitted (beam search ranks by penalised scores, see
`beam_search`); int32 `lengths`, tokens generated before the end token
(`max_length` if none was emitted).
"""

from kerasseq.decoding.beam_search import beam_search
from kerasseq.decoding.config import SearchConfig, SearchConfigError
from kerasseq.decoding.contract import Seq2SeqDecodable, encode_for_search
from kerasseq.decoding.greedy import greedy
from kerasseq.decoding.sampling import sample

__all__ = [
    "SearchConfig",
    "SearchConfigError",
    "Seq2SeqDecodable",
    "beam_search",
    "encode_for_search",
    "greedy",
    "sample",
]
