import keras
import numpy as np
import pytest

from kerasseq.layers import GRUDecoder
from tests.helpers import check_layer


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def seed_004_decoder_step(h_prev, e, Wu, Wr, Wh, bu, br, bh, Wy, by):
    """Seed 004's decoder cell (column vectors, weights `(H, H+E)` over [h; e])."""
    hidden = h_prev.shape[0]
    z = np.concatenate([h_prev, e])
    u = sigmoid(Wu @ z + bu)
    r = sigmoid(Wr @ z + br)
    candidate = np.tanh(Wh[:, hidden:] @ e + r * (Wh[:, :hidden] @ h_prev) + bh)
    h = (1 - u) * candidate + u * h_prev
    return h, Wy @ h + by


def test_step_matches_seed_004_numpy_gru():
    rng = np.random.default_rng(0)
    vocab, emb, units = 9, 3, 4
    decoder = GRUDecoder(vocab, emb, units, attention=None, feed_context=False)
    targets = np.array([[2, 5, 7, 4]])
    decoder(targets, np.zeros((1, units)))
    kernel, recurrent, bias = [w + rng.normal(0, 0.3, w.shape).astype("float32")
                               for w in decoder.cell.get_weights()]
    bias[1] = 0.0  # seed 004 has no bias inside r ⊙ (...)
    decoder.cell.set_weights([kernel, recurrent, bias])
    logits = np.asarray(decoder(targets, np.zeros((1, units)) + 0.1))[0]

    # Keras stores [z | r | h] column blocks; seed 004 stores rows over [h; e].
    block = lambda m, k: m[:, k * units:(k + 1) * units].T  # noqa: E731
    Wu = np.concatenate([block(recurrent, 0), block(kernel, 0)], axis=1)
    Wr = np.concatenate([block(recurrent, 1), block(kernel, 1)], axis=1)
    Wh = np.concatenate([block(recurrent, 2), block(kernel, 2)], axis=1)
    bu, br, bh = bias[0, :units], bias[0, units:2 * units], bias[0, 2 * units:]
    Wy, by = decoder.output_dense.get_weights()
    embedding = decoder.embedding.get_weights()[0]
    h = np.full(units, 0.1)
    for t, token in enumerate(targets[0]):
        h, expected = seed_004_decoder_step(h, embedding[token], Wu, Wr, Wh, bu, br, bh, Wy.T, by)
        np.testing.assert_allclose(logits[t], expected, atol=1e-5)


def _decoder_inputs(rng, units=6, value_dim=5):
    targets = np.array([[2, 5, 7, 4, 3], [2, 6, 3, 0, 0]], "int32")
    initial = rng.normal(size=(2, units)).astype("float32")
    values = rng.normal(size=(2, 4, value_dim)).astype("float32")
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], bool)
    return targets, initial, values, mask


@pytest.mark.parametrize("attention", [None, "bahdanau", "luong", "luong_dot", "luong_concat"])
def test_teacher_forced_call_equals_step_by_step(attention):
    rng = np.random.default_rng(1)
    units = 6
    targets, initial, values, mask = _decoder_inputs(rng, units, value_dim=units)
    decoder = GRUDecoder(11, 4, units, attention=attention)
    if attention is None:
        full = np.asarray(decoder(targets, initial))
    else:
        full, weights = decoder(targets, initial, values, mask, return_attention_scores=True)
        full, weights = np.asarray(full), np.asarray(weights)
    memory = decoder.prepare_memory(initial, values if attention else None, mask)
    state = initial
    for t in range(targets.shape[1]):
        logits, state, step_weights = decoder.step(targets[:, t], state, memory)
        np.testing.assert_allclose(np.asarray(logits), full[:, t], atol=1e-6)
        if attention is not None:
            np.testing.assert_allclose(np.asarray(step_weights), weights[:, t], atol=1e-6)
            assert np.all(np.asarray(step_weights)[1, 2:] == 0)  # padded source


def test_context_vector_model_feeds_the_context_every_step():
    rng = np.random.default_rng(2)
    targets, initial, _, _ = _decoder_inputs(rng)
    with_context = GRUDecoder(11, 4, 6, feed_context=True)
    without = GRUDecoder(11, 4, 6, feed_context=False)
    with_context(targets, initial)
    without(targets, initial)
    assert with_context.cell.get_weights()[0].shape[0] == 4 + 6  # [e_t; c]
    assert without.cell.get_weights()[0].shape[0] == 4


@pytest.mark.parametrize("kwargs, source, cell_input", [
    (dict(attention="bahdanau"), "before", 4 + 5),  # [E[y]; ctx_t] from s_{t-1}
    (dict(attention="luong_concat"), "after", 4),  # ctx_t from s_t, output layer only
    (dict(attention=None), "fixed", 4 + 6),  # [E[y]; s_0]
    (dict(attention=None, feed_context=False), None, 4),  # no ctx_t
])
def test_context_source_names_the_four_decoders(kwargs, source, cell_input):
    rng = np.random.default_rng(6)
    targets, initial, values, mask = _decoder_inputs(rng)
    decoder = GRUDecoder(11, 4, 6, **kwargs)
    decoder(targets, initial, values[..., :5], mask)
    assert decoder.context_source == source
    assert decoder.cell.kernel.shape[0] == cell_input
    context_dim = {"before": 5, "after": 5, "fixed": 6, None: 0}[source]
    assert decoder.output_dense.kernel.shape[0] == 6 + context_dim  # [s_t; ctx_t]


def test_target_padding_changes_no_real_position():
    rng = np.random.default_rng(3)
    targets, initial, values, mask = _decoder_inputs(rng)
    decoder = GRUDecoder(11, 4, 6, attention="bahdanau")
    short = np.asarray(decoder(targets, initial, values, mask))
    long = np.asarray(decoder(np.pad(targets, ((0, 0), (0, 3))), initial, values, mask))
    np.testing.assert_allclose(long[:, :5], short, atol=1e-6)


def test_scheduled_sampling_feeds_own_predictions():
    rng = np.random.default_rng(4)
    targets, initial, values, mask = _decoder_inputs(rng)
    decoder = GRUDecoder(11, 4, 6, attention="bahdanau", sampling_probability=1.0)
    sampled = np.asarray(decoder(targets, initial, values, mask, training=True))
    # Reference: feed argmax of the previous step (the start token stays).
    memory = decoder.prepare_memory(initial, values, mask)
    state, token = initial, targets[:, 0]
    for t in range(targets.shape[1]):
        logits, state, _ = decoder.step(token, state, memory)
        np.testing.assert_allclose(np.asarray(logits), sampled[:, t], atol=1e-5)
        token = np.argmax(np.asarray(logits), -1).astype("int32")
    # Inference never samples, and probability 0 is teacher forcing.
    teacher = np.asarray(decoder(targets, initial, values, mask, training=False))
    decoder.sampling_probability.assign(0.0)
    forced = np.asarray(decoder(targets, initial, values, mask, training=True))
    np.testing.assert_allclose(forced, teacher, atol=1e-6)
    assert not np.allclose(sampled, teacher)


def test_sampling_probability_is_a_non_trainable_variable():
    rng = np.random.default_rng(7)
    targets, initial, values, mask = _decoder_inputs(rng)
    decoder = GRUDecoder(11, 4, 6, attention="bahdanau", sampling_probability=0.25)
    decoder(targets, initial, values, mask)
    variable = decoder.sampling_probability
    assert not variable.trainable
    assert all(weight is not variable for weight in decoder.trainable_weights)
    assert any(weight is variable for weight in decoder.non_trainable_weights)
    assert float(variable.numpy()) == 0.25
    # A training step moves trainable weights, never the probability.
    inputs = [keras.Input(x.shape[1:], dtype=str(x.dtype)) for x in (targets, initial, values, mask)]
    model = keras.Model(inputs, decoder(*inputs))
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
    model.fit([targets, initial, values, mask], np.ones((2, 5, 11)), epochs=2, verbose=0)
    assert float(variable.numpy()) == 0.25


def test_scheduled_sampling_rate_is_respected():
    targets = np.tile(np.arange(2, 10, dtype="int32"), (400, 1))
    decoder = GRUDecoder(12, 4, 6, feed_context=False, sampling_probability=0.3)
    decoder(targets, np.zeros((400, 6)))
    coins = np.asarray(decoder._sampling_coins(targets, training=True))
    assert not coins[0].any()
    assert coins[1:].mean() == pytest.approx(0.3, abs=0.03)


def test_attention_needs_values():
    decoder = GRUDecoder(11, 4, 6, attention="bahdanau")
    with pytest.raises(ValueError, match="values"):
        decoder(np.array([[2, 5]]), np.zeros((1, 6)))


@pytest.mark.parametrize("kwargs, name", [
    (dict(attention="transformer"), "attention"),
    (dict(sampling_probability=1.5), "sampling_probability"),
    (dict(dropout=-0.1), "dropout"),
])
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        GRUDecoder(11, 4, 6, **kwargs)


def test_layer_contract():
    rng = np.random.default_rng(5)
    targets, initial, values, mask = _decoder_inputs(rng)
    check_layer(GRUDecoder, dict(vocab_size=11, embedding_dim=4, units=6, attention="bahdanau",
                                 dropout=0.1, sampling_probability=0.2),
                [targets, initial, values, mask])


def test_layer_contract_without_attention():
    rng = np.random.default_rng(6)
    targets, initial, _, _ = _decoder_inputs(rng)
    check_layer(GRUDecoder, dict(vocab_size=11, embedding_dim=4, units=6), [targets, initial])


@pytest.mark.parametrize("attention", [None, "bahdanau", "luong_concat"])
def test_mixed_float16_layer_policy_matches_float32(attention):
    # A per-layer policy (the global one stays float32) reaches every sub-layer:
    # the decoder computes in float16 and gives float32 logits close to those of
    # the float32 decoder with the same weights; `step` gives the same logits.
    rng = np.random.default_rng(8)
    targets, initial, values, mask = _decoder_inputs(rng)
    memory_inputs = (values, mask) if attention else ()
    reference = GRUDecoder(11, 4, 6, attention=attention)
    expected = np.asarray(reference(targets, initial, *memory_inputs))
    decoder = GRUDecoder(11, 4, 6, attention=attention, dtype="mixed_float16")
    decoder(targets, initial, *memory_inputs)
    decoder.set_weights(reference.get_weights())
    logits = decoder(targets, initial, *memory_inputs)
    sublayers = [decoder.embedding, decoder.cell] + ([decoder.attention] if attention else [])
    assert [layer.compute_dtype for layer in sublayers] == ["float16"] * len(sublayers)
    assert logits.dtype == "float32" and np.all(np.isfinite(np.asarray(logits)))
    np.testing.assert_allclose(np.asarray(logits), expected, atol=1e-2)
    memory = decoder.prepare_memory(initial, *memory_inputs)
    state = initial
    for t in range(targets.shape[1]):
        step_logits, state, _ = decoder.step(targets[:, t], state, memory)
        assert step_logits.dtype == "float32"
        np.testing.assert_allclose(np.asarray(step_logits), np.asarray(logits)[:, t], atol=1e-3)


def test_layer_contract_with_mixed_float16_layer_policy():
    # Config round-trip, symbolic call, fit and .keras save/load keep the policy.
    rng = np.random.default_rng(9)
    targets, initial, values, mask = _decoder_inputs(rng)
    check_layer(GRUDecoder, dict(vocab_size=11, embedding_dim=4, units=6, attention="luong",
                                 dtype="mixed_float16"),
                [targets, initial, values, mask])
