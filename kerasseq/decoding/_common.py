"""Pieces shared by the decoders: argument checks, running a loop, state helpers.

Every decoder in `kerasseq.decoding` drives a model only through the step
contract `step_fn(token_ids, state, step) -> (logits, new_state)` (described,
with the arguments the decoders share, in the docstring of
`kerasseq.decoding`).

The decoders keep no compiled functions (docs/design.md; how a loop runs:
`jit_compile` in `kerasseq.decoding`). Batch buckets, the compile cache and
the trace count belong to `kerasseq.Translator`.
"""

import collections

import tensorflow as tf

from kerasseq._validation import check_int, is_int
from kerasseq.decoding.contract import ATTENTION_WEIGHTS, SOURCE_MASK  # noqa: F401

NEG_INF = float("-inf")
# The id of padding (kerasseq.data's PAD_ID): the results are 0-padded.
PADDING_ID = 0


# --------------------------------------------------------------------------
# Running a loop.
# --------------------------------------------------------------------------


def run_loop(loop, state, batch_size, start_id, jit_compile, *args):
    """Run `loop(start_tokens, state, *args)`, the body of one decoder.

    As `jit_compile` in `kerasseq.decoding` says (inside a `tf.function`,
    `jit_compile=True` makes the loop a nested XLA function). With
    `batch_size=None` the number of rows is read from the state at run time.
    """
    state = prepare_state(state, batch_size)
    if batch_size is None:
        if not state:
            raise ValueError("batch_size=None needs a non-empty state to read the batch size from.")
        batch_size = num_rows(next(iter(state.values())))
    start_tokens = tf.fill([batch_size], tf.constant(start_id, tf.int32))  # (batch_size,)
    if tf.executing_eagerly() or jit_compile:
        loop = tf.function(loop, jit_compile=bool(jit_compile), autograph=False)
    return tuple(loop(start_tokens, state, *args))


# --------------------------------------------------------------------------
# Argument checks.
# --------------------------------------------------------------------------


def check_step_arguments(batch_size, start_id, end_id, banned_ids=()):
    """The decoders' own arguments (`batch_size=None`: taken from the state).

    Returns:
        `never_generated(start_id, end_id, banned_ids)`, the ids to ban.
    """
    if batch_size is not None:
        check_int("batch_size", batch_size, 1)
    check_int("start_id", start_id, 0)
    check_int("end_id", end_id, 0)
    if not isinstance(banned_ids, (tuple, list, set, frozenset)) \
            or not all(is_int(token_id) and token_id >= 0 for token_id in banned_ids):
        raise ValueError("banned_ids must be a sequence of token ids (ints >= 0). "
                         f"Received: banned_ids={banned_ids!r}")
    return never_generated(start_id, end_id, banned_ids)


# --------------------------------------------------------------------------
# State helpers.
# --------------------------------------------------------------------------


def prepare_state(state, batch_size):
    """Convert `state` to a dict of tensors and check every leading axis.

    Args:
        state: a flat dict `{str: tensor}`; every tensor has rank >= 1 and
            `batch_size` rows.
        batch_size: Python int, or `None` to skip the row-count check (the
            batch size is then read from the tensors at run time).

    Returns:
        A new dict with the same keys and `tf.Tensor` values.
    """
    if not isinstance(state, dict):
        raise ValueError(
            "state must be a flat dict {name: tensor}. "
            f"Received: state of type {type(state).__name__}"
        )
    prepared = {}
    for name, value in state.items():
        tensor = tf.convert_to_tensor(value)
        if tensor.shape.rank is None or tensor.shape.rank < 1:
            raise ValueError(
                f"Every state tensor needs a leading batch axis. Received: "
                f"state[{name!r}] with shape {tensor.shape}"
            )
        if batch_size is not None and tensor.shape[0] != batch_size:
            raise ValueError(
                f"Every state tensor must have batch_size={batch_size} rows. "
                f"Received: state[{name!r}] with shape {tensor.shape}"
            )
        prepared[name] = tensor
    return prepared


def num_rows(tensor):
    """Rows of `tensor`: a Python int when static, else an int32 scalar tensor.

    The decoders build their loop variables with it, so they also run when the
    batch size is unknown while tracing (a SavedModel signature with input
    shape `(None,)`).
    """
    rows = tensor.shape[0]
    return rows if rows is not None else tf.shape(tensor)[0]


# --------------------------------------------------------------------------
# Tensor helpers used inside the traced loops.
# --------------------------------------------------------------------------


def log_probs_float32(logits, banned_ids=()):
    """`log_softmax` over the vocabulary, computed in float32, then `-inf` at
    `banned_ids` (`ban_tokens`). The ban comes after the softmax, as fairseq
    bans padding: the other tokens keep the model's log-probabilities (not
    renormalised, like the `min_length` and n-gram bans), so a search's scores
    stay the model's log P of what the text holds."""
    return ban_tokens(tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1), banned_ids)


def never_generated(start_id, end_id, banned_ids=()):
    """The token ids a search never generates: a sorted tuple of Python ints.

    Padding, id `PADDING_ID` (0: the results are 0-padded, so a generated 0
    would vanish from the text while the length counts it), `start_id` (fed at
    step 0, never an output) and `banned_ids` (the caller's, e.g. `[UNK]`).
    `end_id` is never banned: it ends a hypothesis (`min_length` is its ban).
    """
    return tuple(sorted({PADDING_ID, int(start_id), *(int(i) for i in banned_ids)} - {int(end_id)}))


def ban_tokens(logits, banned_ids):
    """`logits` with `-inf` at every id of `banned_ids` (ids beyond the vocabulary
    are ignored); `banned_ids` empty returns `logits` itself.

    Args:
        logits: float `(rows, vocab_size)` (any float dtype; the static or the
            run-time vocabulary size).
        banned_ids: tuple of Python ints.
    """
    if not banned_ids:
        return logits
    vocabulary = tf.range(tf.shape(logits)[-1])  # (vocab_size,)
    banned = tf.reduce_any(
        tf.equal(vocabulary[:, None], tf.constant(banned_ids, tf.int32)[None, :]), axis=1
    )  # (vocab_size,), a constant once the vocabulary size is known
    return tf.where(banned, tf.constant(NEG_INF, logits.dtype), logits)


def forbid_end(log_probs, end_id, step, min_length):
    """Set the end token's log-probability to `-inf` while `step < min_length`.

    At `step` the decoder chooses the token at position `step`, so `step`
    tokens were generated before it; the end token is allowed once
    `min_length` tokens exist.
    """
    if min_length == 0:
        return log_probs
    vocab_size = log_probs.shape[-1]
    is_end = tf.equal(tf.range(vocab_size), end_id)  # (vocab_size,)
    forbidden = tf.logical_and(is_end, step < min_length)  # (vocab_size,)
    return tf.where(forbidden, NEG_INF, log_probs)


def ban_repeated_ngrams(log_probs, sequences, step, size):
    """Set to `-inf` every token that would repeat an n-gram of its hypothesis.

    fairseq's `no_repeat_ngram_size` (n = `size`) over the generated tokens
    y_0 .. y_{step-1}: for every earlier window with y_j .. y_{j+n-2} equal to
    the last n-1 tokens, y_{j+n-1} is banned (n=1: every generated token).
    One `(rows, max_length)` comparison per window offset, then one scatter
    into the vocabulary; positions >= `step` (padding) never take part.

    Args:
        log_probs: float32 `(rows, vocab_size)`.
        sequences: int32 `(rows, max_length)`, the token generated at step i
            in column i.
        step: int32 scalar tensor, the tokens generated so far.
        size: Python int n >= 0; 0 returns `log_probs` itself.
    """
    max_length = sequences.shape[-1]
    if size == 0 or size >= max_length:  # a ban needs y_{j+n-1} at a position < step < max_length
        return log_probs
    # Window j can ban when its follower j+n-1 is generated and lies before the
    # last n-1 tokens' start: j <= step - n.
    matches = tf.broadcast_to(tf.range(max_length) <= step - size, tf.shape(sequences))
    for offset in range(size - 1):
        window = tf.pad(sequences[:, offset:], [[0, 0], [0, offset]])  # y_{j+offset} at j
        last = tf.gather(sequences, tf.maximum(step - size + 1 + offset, 0), axis=1)  # (rows,)
        matches = tf.logical_and(matches, tf.equal(window, last[:, None]))  # (rows, max_length)
    followers = tf.pad(sequences[:, size - 1:], [[0, 0], [0, size - 1]])  # y_{j+n-1} at j
    rows = tf.broadcast_to(tf.range(tf.shape(sequences)[0])[:, None], tf.shape(sequences))
    hits = tf.scatter_nd(tf.stack([rows, followers], axis=-1), tf.cast(matches, tf.int32),
                         tf.shape(log_probs))  # (rows, vocab_size): bans per token
    return tf.where(hits > 0, NEG_INF, log_probs)


def write_token(sequences, position, tokens):
    """Return `sequences` with `tokens` written at `position` on the last axis.

    Args:
        sequences: int32 `(..., max_length)`.
        position: int32 scalar tensor.
        tokens: int32 `(...)`.
    """
    max_length = sequences.shape[-1]
    at_position = tf.equal(tf.range(max_length), position)  # (max_length,)
    return tf.where(at_position, tokens[..., None], sequences)


class PathState(collections.namedtuple(
    "PathState", ["step", "tokens", "sequences", "scores", "lengths", "finished"]
)):
    """Loop variables of a single-path decoder (greedy or sampling).

    Fields:
        step: int32 `()`, the position being generated.
        tokens: int32 `(batch_size,)`, the token fed at `step`.
        sequences: int32 `(batch_size, max_length)`, generated tokens, 0-padded.
        scores: float32 `(batch_size,)`, sum of log-probabilities so far.
        lengths: int32 `(batch_size,)`, tokens generated before the end token.
        finished: bool `(batch_size,)`, the end token was emitted.
    """


def single_path_decode(step_fn, choose_tokens, start_tokens, state, end_id, config,
                       banned_ids=()):
    """Run one `tf.while_loop` that extends one hypothesis per batch row.

    Args:
        step_fn: the model step, see `kerasseq.decoding`.
        choose_tokens: `(masked_log_probs, logits, step) -> next_tokens` with
            `masked_log_probs` float32 `(batch_size, vocab_size)` (end token
            forbidden before `min_length`, repeated n-grams banned), `logits`
            the raw model logits and `next_tokens` int32 `(batch_size,)`.
        start_tokens: int32 `(batch_size,)`.
        state: dict of tensors, batch-leading.
        end_id: Python int.
        config: a `SearchConfig` (`max_length`, `min_length` and
            `no_repeat_ngram_size` are read).
        banned_ids: ids never generated (`never_generated`), banned after the
            softmax (`log_probs_float32`).

    Returns:
        `(token_ids, scores, lengths)`: int32 `(batch_size, max_length)`,
        float32 `(batch_size,)`, int32 `(batch_size,)`.
    """
    batch_size, max_length = num_rows(start_tokens), config.max_length
    path = PathState(
        step=tf.constant(0, tf.int32),
        tokens=start_tokens,
        sequences=tf.zeros([batch_size, max_length], tf.int32),
        scores=tf.zeros([batch_size], tf.float32),
        lengths=tf.zeros([batch_size], tf.int32),
        finished=tf.zeros([batch_size], tf.bool),
    )

    def keep_going(path, state):
        return tf.logical_not(tf.reduce_all(path.finished))

    def extend(path, state):
        logits, new_state = step_fn(path.tokens, state, path.step)
        log_probs = log_probs_float32(logits, banned_ids)  # (batch_size, vocab_size)
        allowed = forbid_end(log_probs, end_id, path.step, config.min_length)
        allowed = ban_repeated_ngrams(allowed, path.sequences, path.step,
                                      config.no_repeat_ngram_size)
        next_tokens = tf.cast(choose_tokens(allowed, logits, path.step), tf.int32)
        token_log_probs = tf.gather(log_probs, next_tokens, batch_dims=1)  # (batch_size,)
        return _advance(path, next_tokens, token_log_probs, end_id), new_state

    path, _ = tf.while_loop(
        keep_going, extend, (path, state), maximum_iterations=max_length
    )
    return path.sequences, path.scores, path.lengths


def _advance(path, next_tokens, token_log_probs, end_id):
    """Book-keeping after one token was chosen per row; finished rows stay put."""
    is_end = tf.equal(next_tokens, end_id)  # (batch_size,)
    frozen = path.finished  # rows that already emitted the end token
    stops_or_frozen = tf.logical_or(frozen, is_end)
    written = tf.where(stops_or_frozen, 0, next_tokens)
    return PathState(
        step=path.step + 1,
        tokens=tf.where(frozen, end_id, next_tokens),
        sequences=write_token(path.sequences, path.step, written),
        scores=path.scores + tf.where(frozen, 0.0, token_log_probs),
        lengths=path.lengths + tf.cast(tf.logical_not(stops_or_frozen), tf.int32),
        finished=stops_or_frozen,
    )
