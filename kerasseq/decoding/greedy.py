"""Greedy decoding: take the most probable token at every step."""

import tensorflow as tf

from kerasseq.decoding import _common
from kerasseq.decoding.config import SearchConfig


@tf.autograph.experimental.do_not_convert  # explicit control flow (docs/design.md)
def greedy(step_fn, state, batch_size, start_id, end_id, max_length, min_length=0, *,
           no_repeat_ngram_size=0, banned_ids=(), jit_compile=False):
    """Decode by choosing the arg-max token at every step.

    At step t the decoder feeds the previous token y_{t-1} (the start token at
    t = 0) and picks

        y_t = argmax_v log P(v | y_{<t}, x)

    until it emits `end_id` or has run `max_length` steps. Greedy search keeps
    one hypothesis per row, so it can miss a sequence whose first token looked
    worse (see `beam_search`).

    Args:
        step_fn, state, batch_size, start_id, end_id, max_length, min_length,
            no_repeat_ngram_size, banned_ids, jit_compile: the "Common
            arguments" of `kerasseq.decoding`.

    Returns:
        `(token_ids, scores, lengths)`: int32 `(batch_size, max_length)`,
        float32 `(batch_size,)`, int32 `(batch_size,)`, as "Common results"
        in `kerasseq.decoding` says.

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
    banned_ids = _common.check_step_arguments(batch_size, start_id, end_id, banned_ids)
    config = SearchConfig(method="greedy", max_length=max_length, min_length=min_length,
                          no_repeat_ngram_size=no_repeat_ngram_size)

    def loop(start_tokens, state):
        return greedy_loop(step_fn, start_tokens, state, config, end_id, banned_ids)

    return _common.run_loop(loop, state, batch_size, start_id, jit_compile)


def greedy_loop(step_fn, start_tokens, state, config, end_id, banned_ids=()):
    """The loop of `greedy` for a checked `SearchConfig`, to run inside a graph.

    Returns:
        `(token_ids, scores, lengths)` as `greedy` does.
    """
    return _common.single_path_decode(step_fn, _arg_max, start_tokens, state, end_id, config,
                                      banned_ids)


def _arg_max(log_probs, logits, step):
    """Most probable allowed token per row: int32 `(batch_size,)`."""
    return tf.argmax(log_probs, axis=-1, output_type=tf.int32)
