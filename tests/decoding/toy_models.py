"""Toy step functions with known probabilities, and independent NumPy references.

`PrefixTableModel` gives every prefix its own row of a random logit table (one
table per batch row), so the best sequence depends on the whole prefix. Its
state mixes int, float, rank-1 and rank-3 tensors; the float running sum and
the rank-3 memory both change the logits, so a decoder that tiles or reorders
the state wrongly gets different probabilities than the NumPy reference.

`assert_xla_matches_graph_mode` is the XLA check every decoder's tests run.
"""

import numpy as np
import tensorflow as tf

START_ID = 0
END_ID = 1
# Every search bans padding (0) and the start token: here both are id 0.
NEVER_GENERATED = (0, START_ID)


class PrefixTableModel:
    """Logits = table[row, code(prefix)] + cos(sum(prefix) * k) + memory term.

    Args:
        batch_size: rows; each row has its own table.
        vocab_size: tokens, `END_ID` = 1 included (`START_ID` = 0, which is
            also padding, gets a logit like every token; the searches ban it).
        seed: NumPy seed for the tables.
        num_codes: size of the prefix hash space; prefixes are numbered
            code = (code * vocab_size + token + 1) % num_codes, which is exact
            (collision-free) while vocab_size ** length stays below it.
        end_bias: added to the end token's logit.
        scale: standard deviation of the table entries.
        masked_ids: ids whose logits this model sets to `-inf` itself (a model
            that never gives them probability; the others renormalised).
        banned_ids: ids a search is asked to ban (`banned_ids=`), for the
            reference `log_probs`: `-inf` after the softmax, not renormalised.
    """

    def __init__(self, batch_size, vocab_size, seed, num_codes=4096, end_bias=0.0, scale=2.0,
                 masked_ids=(), banned_ids=()):
        rng = np.random.default_rng(seed)
        self.batch_size = batch_size
        self.vocab_size = vocab_size
        self.num_codes = num_codes
        self.table = rng.normal(0.0, scale, (batch_size, num_codes, vocab_size))
        self.table[:, :, END_ID] += end_bias
        self.memory = rng.normal(0.0, 0.5, (batch_size, 2, vocab_size))
        self.frequencies = np.arange(1, vocab_size + 1, dtype=np.float64) * 0.7
        self._flat_table = tf.constant(
            self.table.reshape(batch_size * num_codes, vocab_size), tf.float32
        )
        self._frequencies = tf.constant(self.frequencies, tf.float32)
        self.masked_ids = tuple(masked_ids)
        self.banned_ids = tuple(banned_ids)
        self._mask = tf.constant(np.isin(np.arange(vocab_size), self.masked_ids))

    def initial_state(self):
        return {
            "row": tf.range(self.batch_size, dtype=tf.int32),  # (batch,)
            "code": tf.zeros([self.batch_size], tf.int32),  # (batch,)
            "total": tf.zeros([self.batch_size, 1], tf.float32),  # (batch, 1)
            "memory": tf.constant(self.memory, tf.float32),  # (batch, 2, vocab)
        }

    def step_fn(self, token_ids, state, step):
        started = step > 0
        code = tf.where(
            started, (state["code"] * self.vocab_size + token_ids + 1) % self.num_codes, 0
        )
        total = state["total"] + tf.where(started, tf.cast(token_ids, tf.float32), 0.0)[:, None]
        logits = tf.gather(self._flat_table, state["row"] * self.num_codes + code)
        logits += tf.cos(total * self._frequencies)
        logits += state["memory"][:, 0] - state["memory"][:, 1]
        new_state = dict(state, code=code, total=total)
        return tf.where(self._mask, -np.inf, logits), new_state

    def log_probs(self, row, prefix):
        """float64 `(vocab_size,)` log P(. | prefix) for batch row `row`, as the
        searches see it: the model's own distribution (`-inf` at `masked_ids`,
        the others renormalised), then `-inf` at `NEVER_GENERATED` and
        `banned_ids`, the searches' bans, which do not renormalise."""
        code = 0
        for token in prefix:
            code = (code * self.vocab_size + token + 1) % self.num_codes
        logits = self.table[row, code] + np.cos(sum(prefix) * self.frequencies)
        logits = logits + self.memory[row, 0] - self.memory[row, 1]
        logits[list(self.masked_ids)] = -np.inf
        logits = logits - logits.max()
        log_probs = logits - np.log(np.exp(logits).sum())
        log_probs[list(NEVER_GENERATED) + list(self.banned_ids)] = -np.inf
        return log_probs


def length_penalty(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


def repeats_ngram(prefix, token, size):
    """Whether `token` after `prefix` completes an n-gram (n = `size`) that
    `prefix` already holds: the definition of `no_repeat_ngram_size`."""
    if size == 0 or len(prefix) < size:
        return False
    new = tuple(prefix[len(prefix) - size + 1:]) + (token,)
    return any(tuple(prefix[j:j + size]) == new for j in range(len(prefix) - size + 1))


def allowed_log_probs(model, row, prefix, min_length, no_repeat=0):
    log_probs = model.log_probs(row, prefix).copy()
    if len(prefix) < min_length:
        log_probs[END_ID] = -np.inf
    for token in range(model.vocab_size):
        if repeats_ngram(prefix, token, no_repeat):
            log_probs[token] = -np.inf
    return log_probs


def brute_force(model, row, max_length, min_length=0, alpha=0.0):
    """Every output sequence with its exact scores, best penalised score first.

    Returns:
        list of `(score, log_prob, tokens)`; `tokens` excludes the end token.
        A sequence ending with the end token after L tokens has penalty length
        L + 1; one cut at `max_length` has penalty length `max_length`.
    """
    results = []

    def extend(prefix, log_prob):
        log_probs = allowed_log_probs(model, row, prefix, min_length)
        for token in range(model.vocab_size):
            total = log_prob + log_probs[token]
            if total == -np.inf:
                continue
            if token == END_ID:
                score = total / length_penalty(len(prefix) + 1, alpha)
                results.append((score, total, prefix))
            elif len(prefix) + 1 == max_length:
                score = total / length_penalty(max_length, alpha)
                results.append((score, total, prefix + (token,)))
            else:
                extend(prefix + (token,), total)

    extend((), 0.0)
    return sorted(results, key=lambda result: -result[0])


def reference_beam_search(model, row, num_beams, max_length, min_length=0, alpha=0.0,
                          no_repeat=0):
    """Plain-Python alive/finished beam search without early stopping.

    Returns:
        list of `(score, log_prob, tokens)`, best first (all finished ones).
    """
    alive = [((), 0.0)]
    finished = []
    for step in range(max_length):
        candidates = []
        for prefix, log_prob in alive:
            log_probs = allowed_log_probs(model, row, prefix, min_length, no_repeat)
            for token in range(model.vocab_size):
                if log_prob + log_probs[token] > -np.inf:
                    candidates.append((log_prob + log_probs[token], prefix, token))
        candidates.sort(key=lambda candidate: -candidate[0])
        candidates = candidates[: 1 if num_beams == 1 else 2 * num_beams]
        penalty = length_penalty(step + 1, alpha)
        for log_prob, prefix, token in candidates:
            if token == END_ID:
                finished.append((log_prob / penalty, log_prob, prefix))
            elif step == max_length - 1:
                finished.append((log_prob / penalty, log_prob, prefix + (token,)))
        alive = [
            (prefix + (token,), log_prob)
            for log_prob, prefix, token in candidates
            if token != END_ID
        ][:num_beams]
    return sorted(finished, key=lambda result: -result[0])


def reference_greedy(model, row, max_length, min_length=0, no_repeat=0):
    """`(tokens, log_prob)` of greedy decoding for one row."""
    prefix, total = (), 0.0
    for _ in range(max_length):
        log_probs = allowed_log_probs(model, row, prefix, min_length, no_repeat)
        token = int(np.argmax(log_probs))
        total += model.log_probs(row, prefix)[token]
        if token == END_ID:
            break
        prefix += (token,)
    return prefix, total


def unpad(token_ids, length):
    """Tokens of one output row as a tuple, checking the padding is zero."""
    token_ids = np.asarray(token_ids)
    assert not token_ids[length:].any(), f"non-zero padding in {token_ids}"
    return tuple(int(token) for token in token_ids[:length])


def assert_xla_matches_graph_mode(decode, **kwargs):
    """`decode(jit_compile=True, **kwargs)` returns the tokens and lengths of
    `decode(**kwargs)`, and its scores to float32 precision (outputs ordered
    `token_ids, scores, lengths, ...`)."""
    plain = decode(**kwargs)
    compiled = decode(jit_compile=True, **kwargs)
    np.testing.assert_array_equal(plain[0], compiled[0])
    np.testing.assert_array_equal(plain[2], compiled[2])
    np.testing.assert_allclose(plain[1], compiled[1], rtol=1e-5)


class MarkovTableModel:
    """Logits = table[previous token]: a first-order chain given as probabilities.

    Args:
        probabilities: `(vocab_size, vocab_size)` rows summing to 1; zeros
            become `-inf` logits.
        batch_size: rows of the state.
    """

    def __init__(self, probabilities, batch_size=1):
        self.probabilities = np.asarray(probabilities, np.float64)
        with np.errstate(divide="ignore"):
            self.log_table = np.log(self.probabilities)
        self._table = tf.constant(self.log_table, tf.float32)
        self.batch_size = batch_size

    def initial_state(self):
        return {"unused": tf.zeros([self.batch_size, 1], tf.float32)}

    def step_fn(self, token_ids, state, step):
        return tf.gather(self._table, token_ids), state


def sheep_ship_model(batch_size=1):
    """The greedy-versus-beam toy: greedy says "sheep passed", beam "ship passed"."""
    vocabulary = ["[pad]", "[start]", "[end]", "sheep", "ship", "car", "passed", "docked"]
    index = {word: i for i, word in enumerate(vocabulary)}
    probabilities = np.zeros((8, 8))
    probabilities[:, index["[end]"]] = 1.0  # every other context ends
    probabilities[index["[start]"]] = 0.0
    probabilities[index["[start]"], index["sheep"]] = 0.6
    probabilities[index["[start]"], index["ship"]] = 0.4
    for first, passed in (("sheep", 0.55), ("ship", 0.9)):
        probabilities[index[first]] = 0.0
        probabilities[index[first], index["passed"]] = passed
        probabilities[index[first], index["docked"]] = 1.0 - passed
    return MarkovTableModel(probabilities, batch_size), vocabulary


def early_end_model(batch_size=1):
    """P([end]) = 0.6, P(a b [end]) = 0.4 * 0.9 = 0.36, P(a [end]) = 0.04.

    Vocabulary: 0 [start], 1 [end], 2 a, 3 b.
    """
    probabilities = np.zeros((4, 4))
    probabilities[:, END_ID] = 1.0
    probabilities[START_ID] = [0.0, 0.6, 0.4, 0.0]
    probabilities[2] = [0.0, 0.1, 0.0, 0.9]
    return MarkovTableModel(probabilities, batch_size)

