import keras
import numpy as np
import pytest

from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy

Y_TRUE = np.array([[5, 6, 3, 0], [7, 3, 0, 0]], "int32")


def _logits(seed=0):
    return np.random.default_rng(seed).normal(size=(2, 4, 9)).astype("float32")


def test_matches_keras_ignore_class():
    logits = _logits()
    ours = MaskedSparseCategoricalCrossentropy()(Y_TRUE, logits)
    reference = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)(
        Y_TRUE, logits
    )
    np.testing.assert_allclose(float(ours), float(reference), rtol=1e-6)


def test_is_mean_over_real_tokens_only():
    logits = _logits(1)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_probs, Y_TRUE[..., None], -1)[..., 0]
    expected = -picked[Y_TRUE != 0].mean()
    assert float(MaskedSparseCategoricalCrossentropy()(Y_TRUE, logits)) == pytest.approx(expected, rel=1e-6)


def test_label_smoothing_matches_keras_categorical_with_weights():
    logits = _logits(2)
    ours = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)(Y_TRUE, logits)
    mask = (Y_TRUE != 0).astype("float32")
    reference = keras.losses.CategoricalCrossentropy(
        from_logits=True, label_smoothing=0.1, reduction="sum"
    )(keras.ops.one_hot(Y_TRUE, 9), logits, sample_weight=mask) / mask.sum()
    np.testing.assert_allclose(float(ours), float(reference), rtol=1e-5)


def test_padding_logits_do_not_matter():
    a, b = _logits(3), _logits(3)
    b[Y_TRUE == 0] = 100.0
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)
    assert float(loss(Y_TRUE, a)) == pytest.approx(float(loss(Y_TRUE, b)), rel=1e-6)


def test_all_padding_batch_is_zero_not_nan():
    loss = MaskedSparseCategoricalCrossentropy()(np.zeros((2, 3), "int32"), _logits()[:, :3])
    assert float(loss) == 0.0


def test_config_round_trip_and_bad_smoothing():
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.2, pad_id=0)
    clone = MaskedSparseCategoricalCrossentropy.from_config(loss.get_config())
    assert clone.label_smoothing == 0.2
    with pytest.raises(ValueError, match="label_smoothing"):
        MaskedSparseCategoricalCrossentropy(label_smoothing=1.0)


def test_masked_token_accuracy_hand_computed():
    logits = np.zeros((2, 4, 9), "float32")
    predicted = np.array([[5, 1, 3, 4], [7, 2, 8, 8]])  # right: 5, 3 | 7  -> 3 of 5 real
    np.put_along_axis(logits, predicted[..., None], 1.0, -1)
    metric = MaskedTokenAccuracy()
    metric.update_state(Y_TRUE, logits)
    assert float(metric.result()) == pytest.approx(3 / 5)
    metric.update_state(Y_TRUE[:1], logits[:1])  # 2 of 3 more
    assert float(metric.result()) == pytest.approx(5 / 8)
    metric.reset_state()
    assert float(metric.result()) == 0.0
