"""Ancestral sampling with temperature, top-k and top-p (nucleus) filtering."""

import tensorflow as tf

from kerasseq.decoding import _common
from kerasseq.decoding.config import SearchConfig


@tf.autograph.experimental.do_not_convert  # explicit control flow (docs/design.md)
def sample(step_fn, state, batch_size, start_id, end_id, max_length, temperature=1.0, top_k=0,
           top_p=1.0, seed=None, min_length=0, *, no_repeat_ngram_size=0, banned_ids=(),
           jit_compile=False):
    """Decode by drawing every token from the (filtered) model distribution.

    At step t the logits z are divided by the temperature T, filtered, and the
    next token is drawn from

        y_t ~ softmax(filter(z / T))

    Filters run in this order (each is off at its default):
    - top-k (Fan et al., 2018): keep the `top_k` largest logits.
    - top-p (Holtzman et al., 2020, "nucleus"): sort the remaining tokens by
      probability and keep the smallest prefix whose probability mass reaches
      `top_p`; a token is kept when the mass of the tokens ranked above it is
      `< top_p`, so the most probable token always survives.

    Draws use `tf.random.stateless_categorical` with the seed pair
    `(seed, step)`: the same integer `seed` gives the same tokens on every
    call with the same `jit_compile` setting (XLA draws different numbers from
    the same seed than the TensorFlow kernels do).

    Args:
        step_fn, state, batch_size, start_id, end_id, max_length: as in
            `greedy` (the model's step, its state and the search limits).
        temperature: float > 0. Below 1 sharpens the distribution, above 1
            flattens it.
        top_k: int >= 0; 0 disables the top-k filter.
        top_p: float in `(0, 1]`; 1 disables the nucleus filter.
        seed: int, int32 scalar tensor or `None`. `None` draws a fresh seed
            from TensorFlow's global generator (`sampling_seed`; so
            `keras.utils.set_random_seed` makes it repeatable).
        min_length, no_repeat_ngram_size, banned_ids, jit_compile: as in
            `greedy`. (A seeded draw is repeatable for a fixed batch size;
            `kerasseq.Translator` pads batches to buckets, so its draws may
            differ from a direct call's.)

    Returns:
        `(token_ids, scores, lengths)` as `greedy` returns them; the scores
        are the model's log-probabilities before temperature and filtering
        (the banned ids get probability zero, the others are not
        renormalised, as in every search; the draw itself is from the
        distribution over the allowed tokens).

    Example:

    >>> import tensorflow as tf
    >>> logits = tf.math.log([[0.1, 0.1, 0.2, 0.6]])  # after any token
    >>> step_fn = lambda token_ids, state, step: (tf.tile(logits, [tf.size(token_ids), 1]), state)
    >>> ids, scores, lengths = sample(step_fn, {"unused": tf.zeros([2, 1])}, 2, start_id=0,
    ...                               end_id=1, max_length=4, top_k=1, seed=7)
    >>> ids.numpy().tolist()  # top_k=1 keeps only the most probable token
    [[3, 3, 3, 3], [3, 3, 3, 3]]
    """
    banned_ids = _common.check_step_arguments(batch_size, start_id, end_id, banned_ids)
    config = SearchConfig(method="sample", max_length=max_length, min_length=min_length,
                          temperature=temperature, top_k=top_k, top_p=top_p,
                          seed=None if tf.is_tensor(seed) else seed,
                          no_repeat_ngram_size=no_repeat_ngram_size)
    seed_tensor = sampling_seed(seed)

    def loop(start_tokens, state, seed):
        return sample_loop(step_fn, start_tokens, state, config, end_id, seed, banned_ids)

    return _common.run_loop(loop, state, batch_size, start_id, jit_compile, seed_tensor)


def sampling_seed(seed, method="sample"):
    """The int32 scalar seed of one decoding call: the one rule, eager and traced.

    `kerasseq.Translator` (eagerly and in an export's graph) and `sample` both
    ask this function, so a seed means the same draws on every path.

    Args:
        seed: int, int32 scalar tensor or `None`. An int is taken modulo
            `2**31 - 1`; `None` draws a fresh seed from TensorFlow's global
            generator (`tf.random.uniform`: repeatable after
            `keras.utils.set_random_seed`, a new value at every call of a
            traced function).
        method: the search method; greedy and beam search draw nothing and get
            the constant 0.

    Returns:
        An int32 scalar tensor.
    """
    if method != "sample":
        return tf.constant(0, tf.int32)  # unused by greedy and beam search
    if tf.is_tensor(seed):
        return tf.cast(seed, tf.int32)
    if seed is None:
        return tf.random.uniform([], 0, 2**31 - 1, dtype=tf.int32)
    return tf.constant(int(seed) % (2**31 - 1), tf.int32)


def sample_loop(step_fn, start_tokens, state, config, end_id, seed, banned_ids=()):
    """The loop of `sample` for a checked `SearchConfig`, to run inside a graph.

    Args:
        seed: int32 scalar tensor; `config.seed` is not read.

    Returns:
        `(token_ids, scores, lengths)` as `sample` does.
    """
    temperature, top_k, top_p = float(config.temperature), config.top_k, float(config.top_p)

    def draw(log_probs, logits, step):
        return _draw_tokens(log_probs, logits, step, seed, temperature, top_k, top_p)

    return _common.single_path_decode(step_fn, draw, start_tokens, state, end_id, config,
                                      banned_ids)


def _draw_tokens(log_probs, logits, step, seed, temperature, top_k, top_p):
    """One draw per row from the filtered, tempered distribution.

    `log_probs` already carries the `min_length` ban (`-inf` on the end
    token); log-probabilities differ from logits by a per-row constant, so
    filtering them is the same as filtering logits.

    Returns:
        int32 `(batch_size,)`.
    """
    scaled = log_probs / temperature  # (batch_size, vocab_size)
    if top_k > 0:
        scaled = top_k_filter(scaled, top_k)
    if top_p < 1.0:
        scaled = top_p_filter(scaled, top_p)
    seeds = tf.stack([seed, step])  # (2,)
    drawn = tf.random.stateless_categorical(scaled, 1, seed=seeds, dtype=tf.int32)
    return drawn[:, 0]  # (batch_size,)


def top_k_filter(logits, top_k):
    """Set every logit below the row's `top_k`-th largest to `-inf`.

    Args:
        logits: float `(batch_size, vocab_size)`.
        top_k: Python int >= 1.

    Returns:
        float `(batch_size, vocab_size)`; ties with the k-th value are kept.
    """
    top_k = min(top_k, logits.shape[-1])
    kth_largest = tf.math.top_k(logits, k=top_k).values[:, -1:]  # (batch_size, 1)
    return tf.where(logits < kth_largest, _common.NEG_INF, logits)


def top_p_filter(logits, top_p):
    """Keep the smallest set of most probable tokens whose mass reaches `top_p`.

    With tokens sorted by probability p_(1) >= p_(2) >= ..., token (j) is kept
    when sum_{i<j} p_(i) < top_p.

    Args:
        logits: float `(batch_size, vocab_size)`.
        top_p: Python float in `(0, 1)`.

    Returns:
        float `(batch_size, vocab_size)` with the dropped tokens at `-inf`.
    """
    sorted_logits = tf.sort(logits, axis=-1, direction="DESCENDING")  # (batch_size, vocab_size)
    sorted_probs = tf.nn.softmax(sorted_logits, axis=-1)
    mass_above = tf.cumsum(sorted_probs, axis=-1, exclusive=True)  # (batch_size, vocab_size)
    kept = tf.reduce_sum(tf.cast(mass_above < top_p, tf.int32), axis=-1)  # (batch_size,)
    smallest_kept = tf.gather(sorted_logits, kept - 1, batch_dims=1)  # (batch_size,)
    return tf.where(logits < smallest_kept[:, None], _common.NEG_INF, logits)
