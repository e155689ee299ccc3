"""Beam search with alive/finished sets, GNMT length and coverage penalties.

The search follows GNMT (Wu et al., 2016, "Google's Neural Machine
Translation System", section 7) and the Flax WMT example (`decode.py`); the
`beam_search` docstring gives the scores and the stopping rule.
"""

import collections

import tensorflow as tf

from kerasseq.decoding import _common
from kerasseq.decoding.config import SearchConfig

# Smallest coverage value inside the log of the coverage penalty: a source
# position that was never attended costs beta * log(1e-10) instead of -inf.
_COVERAGE_FLOOR = 1e-10


class BeamState(collections.namedtuple("BeamState", [
    "step",
    "alive_tokens",
    "alive_sequences",
    "alive_log_probs",
    "alive_coverage",
    "finished_sequences",
    "finished_scores",
    "finished_log_probs",
    "finished_lengths",
    "row_done",
])):
    """Loop variables of `beam_search` (the model state travels beside them).

    Fields:
        step: int32 `()`, the position being generated.
        alive_tokens: int32 `(batch_size * num_beams,)`, token fed at `step`.
        alive_sequences: int32 `(batch_size, num_beams, max_length)`.
        alive_log_probs: float32 `(batch_size, num_beams)`, sorted best first;
            `-inf` marks an empty slot.
        alive_coverage: float32 `(batch_size * num_beams, source_length)`,
            summed attention weights (`(batch_size * num_beams, 1)` zeros when
            the coverage penalty is off).
        finished_sequences: int32 `(batch_size, num_beams, max_length)`,
            tokens without the end token, 0-padded.
        finished_scores: float32 `(batch_size, num_beams)`, penalised scores
            s(Y, X), sorted best first; `-inf` marks an empty slot.
        finished_log_probs: float32 `(batch_size, num_beams)`, log P(Y | X).
        finished_lengths: int32 `(batch_size, num_beams)`, tokens before the
            end token.
        row_done: bool `(batch_size,)`, the row can no longer improve.
    """


@tf.autograph.experimental.do_not_convert  # explicit control flow (docs/design.md)
def beam_search(
    step_fn,
    state,
    batch_size,
    start_id,
    end_id,
    num_beams=4,
    max_length=64,
    min_length=0,
    length_penalty=0.0,
    coverage_penalty=0.0,
    num_return=1,
    *,
    return_log_probs=False,
    jit_compile=False,
    shared_state=(),
    no_repeat_ngram_size=0,
    banned_ids=(),
):
    """Find high-probability sequences with beam search (GNMT / Flax style).

    Scores. A finished hypothesis Y (end token included) is ranked by

        s(Y, X) = log P(Y | X) / lp(Y) + cp(X; Y)
        lp(Y)   = ((5 + |Y|) / 6) ** alpha                   alpha = length_penalty
        cp(X;Y) = beta * sum_{i real} log(min(sum_t a_{t,i}, 1.0))
                                                             beta = coverage_penalty

    |Y| counts the end token, as in GNMT and Flax: "a b <end>" has |Y| = 3. A
    hypothesis that reaches `max_length` tokens without the end token is
    finished as it is, with |Y| = `max_length`. The sum over t in cp runs over
    every step of the hypothesis, the step that emitted the end token
    included; a_{t,i} is `state["attention_weights"]` returned by `step_fn` at
    step t.

    Search. Each step scores every (alive beam, token) pair by log-probability,
    takes the best `2 * num_beams` (one when `num_beams=1`, which makes the
    search exactly greedy), moves those that end (or reach
    `max_length`) to the finished set and keeps the best `num_beams` others
    alive. A finished hypothesis never takes more tokens. A row stops when

        max alive log P / lp(max_length) < s of its num_return-th finished

    (future tokens only lower log P, lp grows with the length for alpha >= 0,
    and cp <= 0), and the loop stops when every row stopped. Rows where
    nothing finished fall back to their alive beams.

    The model state is tiled to `(batch_size * num_beams, ...)` once and
    reordered with one `tf.gather` per tensor per step, so `step_fn` sees a
    batch of `batch_size * num_beams` rows, beams of a row adjacent.

    Args:
        step_fn: the model's step, as in `greedy`. For `coverage_penalty > 0`,
            `new_state` must carry `"attention_weights"`: float `(rows,
            source_length)`, this step's cross-attention averaged over heads
            and layers; an optional `"source_mask"` `(rows, source_length)`
            (bool or 0/1) marks real source tokens.
        state, batch_size, start_id, end_id: as in `greedy` (the initial
            state, its rows, the start and end tokens).
        num_beams: int >= 1, alive hypotheses kept per row.
        max_length, min_length: as in `greedy` (the most tokens generated,
            the fewest before the end token).
        length_penalty: float alpha >= 0; 0 ranks by log-probability alone,
            larger values favour longer outputs.
        coverage_penalty: float beta >= 0; 0 disables the coverage penalty.
        num_return: int in `[1, num_beams]`, hypotheses returned per row.
        return_log_probs: bool; also return the unpenalised log-probabilities.
        jit_compile: as in `greedy` (XLA).
        shared_state: names of state tensors that are the same for every
            hypothesis of a row (source memory such as cross-attention keys
            and values) and that `step_fn` accepts untiled, with `batch_size`
            rows while `token_ids` has `batch_size * num_beams` (beams of a
            row adjacent). They are neither tiled nor reordered, so the
            search reads one copy per source instead of `num_beams`;
            `step_fn` must return them unchanged. A model lists them in its
            `shared_state_keys` (the Transformer: its cross-attention caches).
        no_repeat_ngram_size: as in `greedy`, for each beam's own tokens.
        banned_ids: as in `greedy` (with padding and `start_id`, never generated).

    Returns:
        `(token_ids, scores, lengths)`, or `(token_ids, scores, lengths,
        log_probs)` with `return_log_probs=True`:
        - `token_ids`: int32 `(batch_size, num_return, max_length)`, best
          first, without the end token; positions `>= lengths` hold 0.
        - `scores`: float32 `(batch_size, num_return)`, the penalised score
          s(Y, X) used for ranking, sorted best first. `-inf` marks a slot
          that no hypothesis filled (tiny search spaces only).
        - `lengths`: int32 `(batch_size, num_return)`, tokens before the end
          token.
        - `log_probs`: float32 `(batch_size, num_return)`, log P(Y | X) with
          the end token included; equal to `scores` when both penalties are 0.
        The bans (`min_length`'s end token, `banned_ids`, padding and the
        start token, repeated n-grams) do not renormalise log P.

    Example:

    >>> import tensorflow as tf
    >>> # vocabulary: 0 start, 1 end, 2 "a", 3 "b"
    >>> table = tf.math.log([[1e-9, 0.6, 0.4, 1e-9],   # after start
    ...                      [1e-9, 1.0, 1e-9, 1e-9],   # after end
    ...                      [1e-9, 0.1, 1e-9, 0.9],    # after "a"
    ...                      [1e-9, 1.0, 1e-9, 1e-9]])  # after "b"
    >>> def step_fn(token_ids, state, step):
    ...     return tf.gather(table, token_ids), state
    >>> ids, scores, lengths = beam_search(step_fn, {"unused": tf.zeros([1, 1])},
    ...     batch_size=1, start_id=0, end_id=1, num_beams=2, max_length=4)
    >>> lengths.numpy().tolist()   # the empty output (p = 0.6) beats "a b" (0.36)
    [[0]]
    """
    banned_ids = _common.check_step_arguments(batch_size, start_id, end_id, banned_ids)
    config = SearchConfig(method="beam", num_beams=num_beams, num_return=num_return,
                          max_length=max_length, min_length=min_length,
                          length_penalty=length_penalty, coverage_penalty=coverage_penalty,
                          no_repeat_ngram_size=no_repeat_ngram_size)
    settings = _beam_settings(config, end_id, shared_state, state,  # before anything is traced
                              banned_ids)

    def loop(start_tokens, state):
        return _search(step_fn, settings, start_tokens, state)

    token_ids, scores, lengths, log_probs = _common.run_loop(
        loop, state, batch_size, start_id, jit_compile)
    if return_log_probs:
        return token_ids, scores, lengths, log_probs
    return token_ids, scores, lengths


def beam_search_loop(step_fn, start_tokens, state, config, end_id, shared_state=(),
                     banned_ids=()):
    """The loop of `beam_search` for a checked `SearchConfig`, to run inside a graph.

    Args:
        config: a `SearchConfig` (`num_beams`, `num_return`, `max_length`,
            `min_length`, `length_penalty`, `coverage_penalty`,
            `no_repeat_ngram_size` are read).
        shared_state: names of state tensors, see `beam_search`.
        banned_ids: the ids never generated (`_common.never_generated`).

    Returns:
        `(token_ids, scores, lengths, log_probs)` as `beam_search` with
        `return_log_probs=True`.
    """
    return _search(step_fn, _beam_settings(config, end_id, shared_state, state, banned_ids),
                   start_tokens, state)


def _beam_settings(config, end_id, shared_state, state, banned_ids=()):
    """The `_BeamSettings` of a `SearchConfig`, checked against the model's `state`."""
    if config.coverage_penalty > 0 and _common.ATTENTION_WEIGHTS not in state:
        raise ValueError(
            "coverage_penalty > 0 needs a model that reports attention weights: "
            f"its state must contain {_common.ATTENTION_WEIGHTS!r} of shape "
            "(batch_size, source_length). Received: "
            f"coverage_penalty={config.coverage_penalty} and a state with keys "
            f"{sorted(state)}"
        )
    return _BeamSettings(
        end_id=end_id, num_beams=config.num_beams, max_length=config.max_length,
        min_length=config.min_length, length_penalty=float(config.length_penalty),
        coverage_penalty=float(config.coverage_penalty), num_return=config.num_return,
        shared_state=_check_shared_state(shared_state, state),
        no_repeat_ngram_size=config.no_repeat_ngram_size, banned_ids=tuple(banned_ids))


# The settings the loop reads, as plain Python values (a SearchConfig may hold
# max_length=None; the loop needs the number of the batch's bucket).
_BeamSettings = collections.namedtuple("_BeamSettings", [
    "end_id", "num_beams", "max_length", "min_length",
    "length_penalty", "coverage_penalty", "num_return", "shared_state", "no_repeat_ngram_size",
    "banned_ids",
])


def _check_shared_state(shared_state, state):
    """`shared_state` as a sorted tuple of names present in `state`."""
    if isinstance(shared_state, str) or not isinstance(shared_state, (tuple, list, set, frozenset)):
        raise ValueError(
            "shared_state must be a sequence of state names. "
            f"Received: shared_state={shared_state!r}"
        )
    missing = sorted(set(shared_state) - set(state))
    if missing:
        raise ValueError(
            f"shared_state names tensors that are not in the state: {missing}. "
            f"State keys: {sorted(state)}"
        )
    if _common.ATTENTION_WEIGHTS in shared_state:
        raise ValueError(
            f"{_common.ATTENTION_WEIGHTS!r} changes at every step; it cannot be shared state."
        )
    return tuple(sorted(shared_state))


# --------------------------------------------------------------------------
# Penalties.
# --------------------------------------------------------------------------


def length_penalty_factor(length, alpha):
    """GNMT length normaliser lp = ((5 + length) / 6) ** alpha, float32."""
    length = tf.cast(length, tf.float32)
    return tf.pow((5.0 + length) / 6.0, alpha)


def coverage_penalty_term(coverage, source_mask, beta):
    """GNMT coverage penalty beta * sum_i log(min(coverage_i, 1)) over real i.

    Args:
        coverage: float32 `(..., source_length)`, summed attention weights.
        source_mask: `(..., source_length)` bool or 0/1, or `None` (all real).
        beta: Python float.

    Returns:
        float32 `(...)`, <= 0.
    """
    capped = tf.clip_by_value(coverage, _COVERAGE_FLOOR, 1.0)
    log_coverage = tf.math.log(capped)  # (..., source_length)
    if source_mask is not None:
        is_real = tf.cast(source_mask, tf.bool)
        log_coverage = tf.where(is_real, log_coverage, 0.0)
    return beta * tf.reduce_sum(log_coverage, axis=-1)


# --------------------------------------------------------------------------
# The search loop.
# --------------------------------------------------------------------------


def _search(step_fn, settings, start_tokens, state):
    """Run the whole search inside one `tf.while_loop`; see `beam_search`."""
    batch_size = _common.num_rows(start_tokens)
    num_beams = settings.num_beams
    state = {
        name: tensor if name in settings.shared_state  # (batch_size, ...): one copy per row
        else tf.repeat(tensor, num_beams, axis=0)  # (batch_size * num_beams, ...)
        for name, tensor in state.items()
    }
    beams = _initial_beams(settings, start_tokens, state)

    def keep_going(beams, state):
        return tf.logical_not(tf.reduce_all(beams.row_done))

    def advance(beams, state):
        return _beam_step(step_fn, settings, batch_size, beams, state)

    beams, _ = tf.while_loop(
        keep_going, advance, (beams, state), maximum_iterations=settings.max_length
    )
    return _best_hypotheses(settings, beams)


def _initial_beams(settings, start_tokens, state):
    """Beam 0 of every row holds the empty hypothesis; other slots are empty."""
    batch_size, num_beams, max_length = (
        _common.num_rows(start_tokens), settings.num_beams, settings.max_length
    )
    first_beam = tf.equal(tf.range(num_beams), 0)  # (num_beams,)
    alive_log_probs = tf.where(first_beam, 0.0, _common.NEG_INF)  # (num_beams,)
    if settings.coverage_penalty > 0:
        source_length = state[_common.ATTENTION_WEIGHTS].shape[-1]
    else:
        source_length = 1
    empty_sequences = tf.zeros([batch_size, num_beams, max_length], tf.int32)
    empty_scores = tf.fill([batch_size, num_beams], _common.NEG_INF)
    return BeamState(
        step=tf.constant(0, tf.int32),
        alive_tokens=tf.repeat(start_tokens, num_beams),  # (batch_size * num_beams,)
        alive_sequences=empty_sequences,
        alive_log_probs=tf.tile(alive_log_probs[None], [batch_size, 1]),  # (batch_size, num_beams)
        alive_coverage=tf.zeros([batch_size * num_beams, source_length], tf.float32),
        finished_sequences=empty_sequences,
        finished_scores=empty_scores,
        finished_log_probs=empty_scores,
        finished_lengths=tf.zeros([batch_size, num_beams], tf.int32),
        row_done=tf.zeros([batch_size], tf.bool),
    )


def _beam_step(step_fn, settings, batch_size, beams, state):
    """One step: expand, split candidates into finished and alive, check stop."""
    num_beams = settings.num_beams
    logits, new_state = step_fn(beams.alive_tokens, state, beams.step)
    log_probs = _common.log_probs_float32(logits, settings.banned_ids)
    # (batch_size * num_beams, vocab_size); never-generated ids at -inf
    log_probs = _common.forbid_end(log_probs, settings.end_id, beams.step, settings.min_length)
    vocab_size, max_length = log_probs.shape[-1], settings.max_length
    log_probs = _common.ban_repeated_ngrams(  # each beam's own tokens
        log_probs, tf.reshape(beams.alive_sequences, [-1, max_length]), beams.step,
        settings.no_repeat_ngram_size)
    log_probs = tf.reshape(log_probs, [batch_size, num_beams, vocab_size])
    # (batch_size, num_beams, vocab_size)
    candidates = _top_candidates(beams, log_probs, settings)

    coverage = beams.alive_coverage
    if settings.coverage_penalty > 0:
        attention = tf.cast(new_state[_common.ATTENTION_WEIGHTS], tf.float32)
        coverage = coverage + attention  # (batch_size * num_beams, source_length)
    source_mask = new_state.get(_common.SOURCE_MASK)
    if source_mask is not None and _common.SOURCE_MASK in settings.shared_state:
        source_mask = tf.repeat(source_mask, num_beams, axis=0)  # (batch_size * num_beams, ...)

    finished = _update_finished(settings, beams, candidates, coverage, source_mask)
    alive_order, alive_log_probs = _select_alive(settings, candidates)
    flat_parents = _flat_indices(
        tf.gather(candidates.parents, alive_order, batch_dims=1), num_beams
    )  # (batch_size * num_beams,)
    for name in settings.shared_state:
        if new_state[name] is not state[name]:
            raise ValueError(
                f"step_fn changed the shared state tensor {name!r}; shared_state may only "
                "name tensors that step_fn returns unchanged (source memory)."
            )
    new_state = {
        name: _reorder(tensor, state[name], flat_parents)  # (batch_size * num_beams, ...)
        for name, tensor in new_state.items()
    }
    alive_sequences = tf.gather(candidates.sequences, alive_order, batch_dims=1)
    # (batch_size, num_beams, max_length)
    alive_tokens = tf.gather(candidates.tokens, alive_order, batch_dims=1)
    # (batch_size, num_beams)
    beams = beams._replace(
        step=beams.step + 1,
        alive_tokens=tf.reshape(alive_tokens, [-1]),  # (batch_size * num_beams,)
        alive_sequences=alive_sequences,
        alive_log_probs=alive_log_probs,
        alive_coverage=tf.gather(coverage, flat_parents),
        # (batch_size * num_beams, source_length)
        **finished,
    )
    return beams._replace(row_done=_rows_done(settings, beams)), new_state


def _reorder(tensor, previous, flat_parents):
    """Move each beam's state tensor to the rows of its surviving children.

    A tensor that the step function passed through unchanged (the very same
    tensor, e.g. encoder outputs or cross-attention keys/values) was tiled from
    one row and is identical across that row's beams; parents are always
    chosen within the row, so the gather would copy it onto itself and is
    skipped.
    """
    if tensor is previous:
        return tensor
    return tf.gather(tensor, flat_parents)  # (batch_size * num_beams, ...)


_Candidates = collections.namedtuple(
    "_Candidates", ["log_probs", "parents", "tokens", "sequences"]
)


def _top_candidates(beams, log_probs, settings):
    """Best `2 * num_beams` (beam, token) extensions per row by log-probability.

    Returns:
        `_Candidates` with `log_probs` float32 `(batch_size, 2 * num_beams)`,
        `parents` and `tokens` int32 `(batch_size, 2 * num_beams)`, and
        `sequences` int32 `(batch_size, 2 * num_beams, max_length)` (the
        parent's tokens plus the new token at `step`, 0 for the end token).
    """
    num_beams, vocab_size = log_probs.shape[1:]
    extended = beams.alive_log_probs[:, :, None] + log_probs
    # (batch_size, num_beams, vocab_size)
    flat = tf.reshape(extended, [-1, num_beams * vocab_size])
    # (batch_size, num_beams * vocab_size)
    num_candidates = min(_candidates_per_step(num_beams), num_beams * vocab_size)
    top_log_probs, top_indices = tf.math.top_k(flat, k=num_candidates)
    # (batch_size, 2 * num_beams)
    parents = top_indices // vocab_size  # (batch_size, 2 * num_beams)
    tokens = top_indices % vocab_size  # (batch_size, 2 * num_beams)
    parent_sequences = tf.gather(beams.alive_sequences, parents, batch_dims=1)
    # (batch_size, 2 * num_beams, max_length)
    written = tf.where(tf.equal(tokens, settings.end_id), 0, tokens)  # end is never stored
    sequences = _common.write_token(parent_sequences, beams.step, written)
    return _Candidates(top_log_probs, parents, tokens, sequences)


def _candidates_per_step(num_beams):
    """2k candidates keep k alive even when some of them end (GNMT / Flax).

    A single beam takes one candidate, so that `num_beams=1` is exactly greedy
    search: with two, a runner-up end token would be kept as a finished
    hypothesis and could win over the greedy path.
    """
    return 1 if num_beams == 1 else 2 * num_beams


def _flat_indices(parents, num_beams):
    """Beam indices `(batch_size, n)` -> rows of the tiled state `(batch_size * n,)`."""
    batch_size = _common.num_rows(parents)
    row_offsets = tf.range(batch_size)[:, None] * num_beams  # (batch_size, 1)
    return tf.reshape(parents + row_offsets, [-1])  # (batch_size * n,)


def _update_finished(settings, beams, candidates, coverage, source_mask):
    """Merge the candidates that end (or hit `max_length`) into the finished set.

    Returns:
        A dict of the four `finished_*` fields of `BeamState`.
    """
    step = beams.step
    is_end = tf.equal(candidates.tokens, settings.end_id)  # (batch_size, 2 * num_beams)
    is_last_step = tf.equal(step, settings.max_length - 1)
    finishes = tf.logical_or(is_end, is_last_step)
    finishes = tf.logical_and(finishes, candidates.log_probs > _common.NEG_INF)
    finishes = tf.logical_and(finishes, tf.logical_not(beams.row_done)[:, None])

    # |Y| counts the end token, so every candidate created now has length step + 1.
    scores = candidates.log_probs / length_penalty_factor(step + 1, settings.length_penalty)
    if settings.coverage_penalty > 0:
        scores += _candidate_coverage_term(settings, candidates, coverage, source_mask)
    scores = tf.where(finishes, scores, _common.NEG_INF)  # (batch_size, 2 * num_beams)
    lengths = step + tf.cast(tf.logical_not(is_end), tf.int32)  # (batch_size, 2 * num_beams)

    merged_scores = tf.concat([beams.finished_scores, scores], axis=1)
    # (batch_size, 3 * num_beams)
    finished_scores, order = tf.math.top_k(merged_scores, k=settings.num_beams)
    # (batch_size, num_beams)

    def keep(old, new):
        merged = tf.concat([old, new], axis=1)
        return tf.gather(merged, order, batch_dims=1)

    return dict(
        finished_scores=finished_scores,
        finished_log_probs=keep(beams.finished_log_probs, candidates.log_probs),
        finished_lengths=keep(beams.finished_lengths, lengths),
        finished_sequences=keep(beams.finished_sequences, candidates.sequences),
        # (batch_size, num_beams, max_length)
    )


def _candidate_coverage_term(settings, candidates, coverage, source_mask):
    """cp(X; Y) for every candidate, from its parent's summed attention.

    Returns:
        float32 `(batch_size, 2 * num_beams)`.
    """
    num_candidates = candidates.parents.shape[1]
    flat_parents = _flat_indices(candidates.parents, settings.num_beams)
    # (batch_size * 2 * num_beams,)
    candidate_coverage = tf.gather(coverage, flat_parents)
    # (batch_size * 2 * num_beams, source_length)
    if source_mask is not None:
        source_mask = tf.gather(source_mask, flat_parents)
        # (batch_size * 2 * num_beams, source_length)
    term = coverage_penalty_term(candidate_coverage, source_mask, settings.coverage_penalty)
    return tf.reshape(term, [-1, num_candidates])  # (batch_size, 2 * num_beams)


def _select_alive(settings, candidates):
    """Best `num_beams` candidates that did not emit the end token.

    Returns:
        `(order, log_probs)`: int32 and float32 `(batch_size, num_beams)`,
        `order` indexing the candidate axis.
    """
    is_end = tf.equal(candidates.tokens, settings.end_id)
    alive_log_probs = tf.where(is_end, _common.NEG_INF, candidates.log_probs)
    # (batch_size, 2 * num_beams)
    log_probs, order = tf.math.top_k(alive_log_probs, k=settings.num_beams)
    # (batch_size, num_beams)
    return order, log_probs


def _rows_done(settings, beams):
    """Rows whose best alive beam cannot beat their `num_return`-th finished one.

    With alpha >= 0, log P <= 0 only falls as tokens are added and lp grows
    with the length, so log P_now / lp(max_length) bounds every future
    s(Y, X); cp <= 0 adds nothing to the bound.

    Returns:
        bool `(batch_size,)`.
    """
    best_possible = beams.alive_log_probs[:, 0] / length_penalty_factor(
        settings.max_length, settings.length_penalty
    )  # (batch_size,)
    kept_worst = beams.finished_scores[:, settings.num_return - 1]  # (batch_size,)
    cannot_improve = tf.logical_or(
        kept_worst > best_possible, tf.equal(best_possible, _common.NEG_INF)
    )
    return tf.logical_or(beams.row_done, cannot_improve)


def _best_hypotheses(settings, beams):
    """The `num_return` best finished hypotheses; alive beams for empty rows.

    Returns:
        `(token_ids, scores, lengths, log_probs)` with shapes
        `(batch_size, num_return, max_length)`, `(batch_size, num_return)` x3.
    """
    num_return = settings.num_return
    has_finished = beams.finished_scores[:, 0] > _common.NEG_INF  # (batch_size,)
    alive_scores = beams.alive_log_probs / length_penalty_factor(
        beams.step, settings.length_penalty
    )  # (batch_size, num_beams)
    alive_lengths = tf.fill(tf.shape(beams.alive_log_probs), beams.step)

    def pick(finished, alive):
        mask = tf.reshape(has_finished, [-1] + [1] * (len(finished.shape) - 1))
        return tf.where(mask, finished, alive)[:, :num_return]

    return (
        pick(beams.finished_sequences, beams.alive_sequences),
        pick(beams.finished_scores, alive_scores),
        pick(beams.finished_lengths, alive_lengths),
        pick(beams.finished_log_probs, beams.alive_log_probs),
    )
