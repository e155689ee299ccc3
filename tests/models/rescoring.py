"""Re-score decoded hypotheses with a teacher-forced forward pass.

Shared by the model tests: the scores of `generate(method="beam")` must be the
log-probabilities that the model's training `call` assigns to the returned
tokens (plus the end token), with the GNMT length penalty applied on top.
"""

import numpy as np
from keras import ops


def teacher_forced_log_probs(model, source_ids, hypotheses):
    """log P(tokens (+ end) | source) of each hypothesis, from one forward pass.

    Sum over target positions of log_softmax of `model([source_ids, target_in])`
    at the chosen tokens; hypotheses are right-padded into one batch (padding
    changes no real position, a property both models test).

    Args:
        model: a kerasseq model.
        source_ids: int `(num_hypotheses, source_length)`, the source of each one.
        hypotheses: list of `(tokens, ended)`: the generated tokens without the
            end token, and whether the end token followed them.

    Returns:
        float64 `(num_hypotheses,)`.
    """
    targets = [list(tokens) + ([model.end_id] if ended else []) for tokens, ended in hypotheses]
    length = max(len(target) for target in targets)
    target_in = np.zeros((len(targets), length), "int32")
    for row, target in enumerate(targets):
        target_in[row, :len(target)] = [model.start_id] + target[:-1]
    logits = model([np.asarray(source_ids, "int32"), target_in])
    log_probs = np.asarray(ops.log_softmax(logits, axis=-1))  # (num_hypotheses, length, vocab_size)
    return np.array([sum(float(log_probs[row, t, token]) for t, token in enumerate(target))
                     for row, target in enumerate(targets)])


def assert_beam_scores_equal_teacher_forcing(model, words, num_beams=4, num_return=3,
                                             max_length=12, length_penalty=0.0, atol=1e-4):
    """Beam n-best lists of `words`: `log_probs` equal the teacher-forced
    log-probabilities, and `scores` equal them divided by the GNMT length
    penalty ((5 + |Y|) / 6) ** alpha (|Y| counts the end token)."""
    source_ids = np.asarray(model.source_tokenizer.encode(words).to_tensor())
    outputs = model.generate(source_ids, method="beam", num_beams=num_beams, num_return=num_return,
                             max_length=max_length, length_penalty=length_penalty,
                             return_log_probs=True)
    token_ids, scores, lengths, log_probs = map(np.asarray, outputs)
    assert token_ids.shape == (len(words), num_return, max_length)
    assert np.all(token_ids * (np.arange(max_length) >= lengths[..., None]) == 0)  # 0 after the end
    ended = lengths < max_length  # (batch_size, num_return)
    hypotheses = [(token_ids[row, rank, :lengths[row, rank]], ended[row, rank])
                  for row in range(len(words)) for rank in range(num_return)]
    expected = teacher_forced_log_probs(model, np.repeat(source_ids, num_return, axis=0), hypotheses)
    expected = expected.reshape(len(words), num_return)
    np.testing.assert_allclose(log_probs, expected, atol=atol)
    penalty = ((5.0 + np.where(ended, lengths + 1, max_length)) / 6.0) ** length_penalty
    np.testing.assert_allclose(scores, expected / penalty, atol=atol)
    assert np.all(np.diff(scores, axis=1) <= 1e-6)  # best first
    for row in range(len(words)):  # an n-best list, not one hypothesis repeated
        assert len({tuple(tokens) for tokens, _ in hypotheses[row * num_return:(row + 1) * num_return]}) \
            == num_return
