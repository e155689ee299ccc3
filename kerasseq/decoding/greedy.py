"""Greedy decoding: take the most probable token at every step."""

import tensorflow as tf

from kerasseq.decoding import _common
from kerasseq.decoding.config import SearchConfig


def greedy(
    step_fn,
    state,
    batch_size,
    start_id,
    end_id,
    max_length,
    min_length=0,
    *,
    jit_compile=False,
    batch_buckets=None,
):
    """Decode by choosing the arg-max token at every step.

    At step t the decoder feeds the previous token y_{t-1} (the start token at
    t = 0) and picks

        y_t = argmax_v log P(v | y_{<t}, x)

    until it emits `end_id` or has run `max_length` steps. Greedy search keeps
    one hypothesis per row, so it can miss a sequence whose first token looked
    worse (see `beam_search`).

    The whole loop is one `tf.while_loop`. Inside a `tf.function` (yours, or
    the one `kerasseq.Translator` compiles) it becomes part of that graph.
    Called eagerly it runs as a `tf.function` traced for this call alone (no
    cache: to decode many batches, call `greedy` inside your own
    `tf.function`, which TensorFlow reuses for every state of the same shape;
    with `batch_size=None` and an input signature whose batch axis is `None`,
    one graph serves every batch size).

    Args:
        step_fn: `step_fn(token_ids, state, step) -> (logits, new_state)`.
            `token_ids` int32 `(batch_size,)`, `step` int32 scalar tensor (0
            when the start token is fed), `logits` `(batch_size, vocab_size)`
            unnormalised, `new_state` with the keys, shapes and dtypes of
            `state`.
        state: flat dict `{str: tensor}`, every tensor with `batch_size` rows,
            typically the output of the model's `encode`.
        batch_size: Python int, rows in `state`, or `None` to read the number
            of rows from the state tensors at run time. Use `None` inside a
            `tf.function` traced with an unknown batch size (a SavedModel
            signature, for instance); `batch_buckets` is then ignored.
        start_id: int, token fed at step 0.
        end_id: int, token that ends a hypothesis.
        max_length: int >= 1, the most steps run (and tokens generated,
            counting the end token).
        min_length: int in `[0, max_length]`; the end token gets probability
            zero until `min_length` tokens were generated.
        jit_compile: bool, compile the loop with XLA.
        batch_buckets: deprecated and ignored (a `DeprecationWarning`):
            `kerasseq.Translator` pads batches to buckets.

    Returns:
        `(token_ids, scores, lengths)`:
        - `token_ids`: int32 `(batch_size, max_length)`, the generated tokens
          without the end token; positions `>= lengths` hold 0.
        - `scores`: float32 `(batch_size,)`, the sum of the model's
          log-probabilities of the generated tokens, including the end token
          when it was emitted. The end-token ban of `min_length` does not
          renormalise these log-probabilities.
        - `lengths`: int32 `(batch_size,)`, tokens generated before the end
          token (`max_length` if no end token was emitted).

    Example:

    >>> import tensorflow as tf
    >>> table = tf.math.log([[0.1, 0.1, 0.1, 0.7], [0.1, 0.1, 0.7, 0.1],
    ...                      [0.1, 0.7, 0.1, 0.1], [0.1, 0.1, 0.7, 0.1]])
    >>> def step_fn(token_ids, state, step):
    ...     return tf.gather(table, token_ids), state
    >>> state = {"unused": tf.zeros([1, 1])}
    >>> ids, scores, lengths = greedy(step_fn, state, 1, start_id=0, end_id=1,
    ...                               max_length=5)
    >>> ids.numpy().tolist(), lengths.numpy().tolist()
    ([[3, 2, 0, 0, 0]], [2])
    """
    _common.check_step_arguments(batch_size, start_id, end_id)
    config = SearchConfig(method="greedy", max_length=max_length, min_length=min_length)

    def loop(start_tokens, state):
        return greedy_loop(step_fn, start_tokens, state, config, end_id)

    return _common.run_loop("greedy", loop, state, batch_size, start_id, jit_compile,
                            batch_buckets)


def greedy_loop(step_fn, start_tokens, state, config, end_id):
    """The loop of `greedy` for a checked `SearchConfig`, to run inside a graph.

    Returns:
        `(token_ids, scores, lengths)` as `greedy` does.
    """
    return _common.single_path_decode(step_fn, _arg_max, start_tokens, state, end_id,
                                      config.max_length, config.min_length)


def _arg_max(log_probs, logits, step):
    """Most probable allowed token per row: int32 `(batch_size,)`."""
    return tf.argmax(log_probs, axis=-1, output_type=tf.int32)
