"""Pieces shared by the decoders: argument checks, state helpers, the trace cache.

Every decoder in `kerasseq.decoding` drives a model only through the step
contract

    step_fn(token_ids, state, step) -> (logits, new_state)

with `token_ids` int32 `(batch_size,)`, `step` an int32 scalar tensor (0 when
the start token is fed), `logits` `(batch_size, vocab_size)` and `state` a flat
dict of tensors whose leading axis is the batch.
"""

import collections

import tensorflow as tf

from kerasseq._validation import check_int

NEG_INF = float("-inf")

# Coverage keys a model may put in its state (see `beam_search`).
ATTENTION_WEIGHTS = "attention_weights"
SOURCE_MASK = "source_mask"

_CACHE_SIZE = 64
_FUNCTION_CACHE = collections.OrderedDict()
_TRACE_COUNTS = collections.Counter()


# --------------------------------------------------------------------------
# Tracing: one `tf.function` per (decoder, step_fn, static settings).
# --------------------------------------------------------------------------


def trace_count(kind=None):
    """Number of times a decoding graph was traced since the process started.

    Tracing happens the first time a decoder runs with a given `step_fn`,
    static settings and state shapes. Calling again with the same shapes reuses
    the graph, so the count stays put; use `batch_buckets` to let several batch
    sizes share one graph.

    Args:
        kind: `"greedy"`, `"beam_search"` or `"sample"` to count one decoder,
            `None` (default) to count all of them.

    Returns:
        A Python `int`.

    Example: call `greedy(step_fn, state, ...)` twice with the same shapes and
    `trace_count("greedy")` grows by one, not two.
    """
    if kind is None:
        return sum(_TRACE_COUNTS.values())
    return _TRACE_COUNTS[kind]


def clear_cache():
    """Forget every compiled decoding function (the trace counts are kept)."""
    _FUNCTION_CACHE.clear()


def note_trace(kind):
    """Called from inside a traced function body: runs once per trace."""
    _TRACE_COUNTS[kind] += 1


def cached_function(kind, step_fn, settings, jit_compile, build):
    """Return the `tf.function` for `(kind, step_fn, settings, jit_compile)`.

    `build()` returns the Python function to wrap; it is only called on a cache
    miss. The cache is a small LRU so short-lived step functions (tests,
    notebooks) do not pile up.
    """
    try:
        hash(step_fn)
    except TypeError:  # unhashable callables are cached by identity
        step_fn = ("id", id(step_fn))
    key = (kind, step_fn, settings, bool(jit_compile))
    function = _FUNCTION_CACHE.get(key)
    if function is None:
        function = tf.function(build(), jit_compile=bool(jit_compile))
        _FUNCTION_CACHE[key] = function
        if len(_FUNCTION_CACHE) > _CACHE_SIZE:
            _FUNCTION_CACHE.popitem(last=False)
    else:
        _FUNCTION_CACHE.move_to_end(key)
    return function


# --------------------------------------------------------------------------
# Argument checks.
# --------------------------------------------------------------------------


def check_common(batch_size, start_id, end_id, max_length, min_length):
    """Checks shared by the three decoders (`batch_size=None`: taken from the state)."""
    if batch_size is not None:
        check_int("batch_size", batch_size, 1)
    check_int("start_id", start_id, 0)
    check_int("end_id", end_id, 0)
    check_int("max_length", max_length, 1)
    check_int("min_length", min_length, 0, max_length, "max_length")


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


def bucket_size(batch_size, buckets="pow2"):
    """Smallest bucket that holds `batch_size` rows.

    Args:
        batch_size: Python int >= 1.
        buckets: `"pow2"` (or `True`) for powers of two, or an increasing
            sequence of ints such as `(8, 32, 128)`.

    Returns:
        A Python int >= `batch_size`. With explicit buckets, a batch larger
        than the last bucket is returned unchanged.

    Example:

    >>> bucket_size(5)
    8
    >>> bucket_size(5, buckets=(4, 16))
    16
    """
    check_int("batch_size", batch_size, 1)
    if buckets is True or buckets == "pow2":
        return 1 << (batch_size - 1).bit_length()
    for bucket in sorted(buckets):
        if bucket >= batch_size:
            return int(bucket)
    return batch_size


def pad_state(state, batch_size, padded_batch_size):
    """Pad every state tensor from `batch_size` to `padded_batch_size` rows.

    The extra rows repeat row 0, so they are valid model inputs (a zero source
    mask, for instance, could make attention divide by zero). Their outputs
    are dropped by the decoders.

    Args:
        state: dict of tensors with `batch_size` rows.
        batch_size: Python int.
        padded_batch_size: Python int >= `batch_size`.

    Returns:
        A dict with the same keys; every tensor has `padded_batch_size` rows.
    """
    extra = padded_batch_size - batch_size
    if extra == 0:
        return dict(state)
    rows = tf.concat([tf.range(batch_size), tf.zeros([extra], tf.int32)], axis=0)
    return {name: tf.gather(tensor, rows) for name, tensor in state.items()}


def num_rows(tensor):
    """Rows of `tensor`: a Python int when static, else an int32 scalar tensor.

    The decoders build their loop variables with it, so they also run when the
    batch size is unknown while tracing (a SavedModel signature with input
    shape `(None,)`).
    """
    rows = tensor.shape[0]
    return rows if rows is not None else tf.shape(tensor)[0]


def run_decoder(function, state, batch_size, start_id, batch_buckets, *args):
    """Pad the batch to a bucket, run a compiled decoder, drop the padding rows.

    With `batch_size=None` the batch size comes from the state tensors at run
    time and `batch_buckets` is ignored: the traced graph already accepts any
    number of rows.
    """
    state = prepare_state(state, batch_size)
    if batch_size is None:
        if not state:
            raise ValueError("batch_size=None needs a non-empty state to read the batch size from.")
        rows = num_rows(next(iter(state.values())))
        start_tokens = tf.fill([rows], tf.constant(start_id, tf.int32))  # (batch_size,)
        return tuple(function(start_tokens, state, *args))
    padded = batch_size if batch_buckets is None else bucket_size(batch_size, batch_buckets)
    state = pad_state(state, batch_size, padded)
    start_tokens = tf.fill([padded], tf.constant(start_id, tf.int32))  # (padded,)
    outputs = function(start_tokens, state, *args)
    return tuple(output[:batch_size] for output in outputs)


# --------------------------------------------------------------------------
# Tensor helpers used inside the traced loops.
# --------------------------------------------------------------------------


def log_probs_float32(logits):
    """`log_softmax` over the vocabulary, computed in float32."""
    return tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)


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


def single_path_decode(step_fn, choose_tokens, start_tokens, state, end_id, max_length, min_length):
    """Run one `tf.while_loop` that extends one hypothesis per batch row.

    Args:
        step_fn: the model step, see the module docstring.
        choose_tokens: `(masked_log_probs, logits, step) -> next_tokens` with
            `masked_log_probs` float32 `(batch_size, vocab_size)` (end token
            forbidden before `min_length`), `logits` the raw model logits and
            `next_tokens` int32 `(batch_size,)`.
        start_tokens: int32 `(batch_size,)`.
        state: dict of tensors, batch-leading.
        end_id, max_length, min_length: Python ints.

    Returns:
        `(token_ids, scores, lengths)`: int32 `(batch_size, max_length)`,
        float32 `(batch_size,)`, int32 `(batch_size,)`.
    """
    batch_size = num_rows(start_tokens)
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
        log_probs = log_probs_float32(logits)  # (batch_size, vocab_size)
        allowed = forbid_end(log_probs, end_id, path.step, min_length)
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
