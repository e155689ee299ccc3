import json
import os
import sys

import keras
import numpy as np
import pytest

from kerasseq.training import (
    MaskedSparseCategoricalCrossentropy,
    MaskedTokenAccuracy,
    guided_alignment_loss,
)
from tests import processes

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


# ------------------------------------------- sample weights and Keras masks
# Four rows, four positions: rows of 2, 1, 3 and 0 real tokens + end (id 3).
Y4 = np.array([[5, 6, 3, 0], [7, 3, 0, 0], [4, 8, 9, 3], [3, 0, 0, 0]], "int32")
REAL4 = (Y4 != 0).astype("float32")


def _logits4(seed=0):
    return np.random.default_rng(seed).normal(size=(4, 4, 11)).astype("float32")


def _keras_reference(y_true, logits, token_weights):
    """Keras' own cross-entropy: the weighted mean, the padding folded into the weights."""
    return float(keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="mean_with_sample_weight")(y_true, logits,
                                                                sample_weight=token_weights))


ROW_WEIGHTS = {"ones": np.ones(4), "row 0 only": np.array([1.0, 0, 0, 0]),
               "mixed": np.array([2.0, 1.0, 0.5, 3.0])}


@pytest.mark.parametrize("name", sorted(ROW_WEIGHTS))
@pytest.mark.parametrize("layout", ["(batch,)", "(batch, 1)"])
def test_row_weights_scale_rows_as_keras_weights_tokens(name, layout):
    weights = ROW_WEIGHTS[name].astype("float32")
    given = weights if layout == "(batch,)" else weights[:, None]
    logits = _logits4()
    ours = float(MaskedSparseCategoricalCrossentropy()(Y4, logits, sample_weight=given))
    assert ours == pytest.approx(_keras_reference(Y4, logits, weights[:, None] * REAL4), rel=1e-6)


def test_weights_that_are_all_one_change_nothing_and_zero_drops_a_row():
    logits = _logits4()
    loss = MaskedSparseCategoricalCrossentropy()
    plain = float(loss(Y4, logits))
    assert float(loss(Y4, logits, sample_weight=np.ones(4))) == pytest.approx(plain, rel=1e-6)
    assert float(loss(Y4, logits, sample_weight=np.full(4, 3.0))) == pytest.approx(plain, rel=1e-6)
    # weight 0 drops rows 1-3 from the numerator and the denominator: row 0's own loss
    row_0 = float(loss(Y4[:1], logits[:1]))
    assert float(loss(Y4, logits, sample_weight=[1.0, 0.0, 0.0, 0.0])) == pytest.approx(row_0, rel=1e-6)
    assert row_0 != pytest.approx(plain, rel=1e-3)
    assert float(loss(Y4, logits, sample_weight=np.zeros(4))) == 0.0


@pytest.mark.parametrize("layout", ["(batch, T)", "(batch, T, 1)"])
def test_token_weights_match_keras(layout):
    weights = np.random.default_rng(5).uniform(0.0, 2.0, size=(4, 4)).astype("float32")
    given = weights if layout == "(batch, T)" else weights[..., None]
    logits = _logits4(1)
    for smoothing in (0.0, 0.1):
        ours = float(MaskedSparseCategoricalCrossentropy(label_smoothing=smoothing)(
            Y4, logits, sample_weight=given))
        reference = float(keras.losses.CategoricalCrossentropy(
            from_logits=True, label_smoothing=smoothing, reduction="mean_with_sample_weight")(
                keras.ops.one_hot(Y4, 11), logits, sample_weight=weights * REAL4))
        assert ours == pytest.approx(reference, rel=1e-5)


def test_other_reductions_follow_keras():
    logits = _logits4(2)
    weights = np.array([2.0, 1.0, 0.5, 3.0], "float32")
    per_token = weights[:, None] * REAL4
    keras_values = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")(
        Y4, logits).numpy()
    values = MaskedSparseCategoricalCrossentropy(reduction="none")(Y4, logits, sample_weight=weights)
    np.testing.assert_allclose(values, keras_values * per_token, rtol=1e-6)
    summed = MaskedSparseCategoricalCrossentropy(reduction="sum")(Y4, logits, sample_weight=weights)
    assert float(summed) == pytest.approx(float((keras_values * per_token).sum()), rel=1e-6)
    # "sum_over_batch_size" = Keras' cross-entropy with ignore_class: Σ w m CE / Σ m
    ignore = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)(
        Y4, logits, sample_weight=np.broadcast_to(weights[:, None], (4, 4)))
    for reduction in ("sum_over_batch_size", "mean"):
        ours = MaskedSparseCategoricalCrossentropy(reduction=reduction)(Y4, logits, sample_weight=weights)
        assert float(ours) == pytest.approx(float(ignore), rel=1e-6)


def test_values_without_weights_are_the_ones_before_weights_were_supported():
    # Written by the code before sample weights were supported (the scalar token
    # mean), on these inputs: the values must not move.
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 4, 11)).astype("float32")
    links = (rng.random((2, 3, 4)) > 0.6).astype("float32")
    attention = keras.ops.softmax(rng.normal(size=(2, 3, 4)).astype("float32")).numpy()
    assert float(MaskedSparseCategoricalCrossentropy()(Y4, logits)) == pytest.approx(2.74886179, rel=1e-6)
    assert float(MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)(Y4, logits)) == pytest.approx(
        2.74778366, rel=1e-6)
    probabilities = keras.ops.softmax(logits).numpy()
    assert float(MaskedSparseCategoricalCrossentropy(label_smoothing=0.2, from_logits=False)(
        Y4, probabilities)) == pytest.approx(2.74670601, rel=1e-6)
    assert float(guided_alignment_loss(links, attention)) == pytest.approx(1.67060280, rel=1e-6)


def test_guided_alignment_loss_weights_rows_and_pieces_like_the_cross_entropy():
    rng = np.random.default_rng(3)
    links = (rng.random((3, 4, 5)) > 0.5).astype("float32")
    attention = keras.ops.softmax(rng.normal(size=(3, 4, 5)).astype("float32")).numpy()
    row_0 = float(guided_alignment_loss(links[:1], attention[:1]))
    assert float(guided_alignment_loss(links, attention, sample_weight=[1.0, 0.0, 0.0])) == pytest.approx(
        row_0, rel=1e-6)
    assert float(guided_alignment_loss(links, attention, sample_weight=np.ones(3))) == pytest.approx(
        float(guided_alignment_loss(links, attention)), rel=1e-6)
    # per piece, by hand: Σ w · row loss / Σ w over the linked pieces
    weights = rng.uniform(0.0, 2.0, size=(3, 4))
    mass = links.sum(-1)
    row_loss = -((links / np.maximum(mass, 1e-12)[..., None]) * np.log(attention)).sum(-1)
    linked = weights * (mass > 0)
    expected = (row_loss * linked).sum() / linked.sum()
    assert float(guided_alignment_loss(links, attention, sample_weight=weights)) == pytest.approx(
        expected, rel=1e-5)


def _masked_logits_model():
    """Ids → Embedding(mask_zero) → Dense: logits that carry the Keras mask of the ids."""
    keras.utils.set_random_seed(0)
    ids = keras.Input((4,), dtype="int32")
    logits = keras.layers.Dense(11)(keras.layers.Embedding(11, 6, mask_zero=True)(ids))
    return keras.Model(ids, logits)


def test_a_keras_mask_on_the_logits_counts_once():
    model = _masked_logits_model()
    # Target-in ids: the Keras mask agrees with the padding of Y4, except that
    # row 2 hides its second real token (id 0 in the input, 8 in the target).
    target_in = np.array([[2, 5, 6, 0], [2, 7, 0, 0], [2, 0, 8, 9], [2, 0, 0, 0]], "int32")
    keras_mask = (target_in != 0).astype("float32")
    logits = model.predict(target_in, verbose=0)  # a NumPy array: no mask
    reference = _keras_reference(Y4, logits, REAL4 * keras_mask)
    loss = MaskedSparseCategoricalCrossentropy()
    assert float(loss(Y4, model(target_in))) == pytest.approx(reference, rel=1e-5)
    model.compile(loss=loss)
    assert model.evaluate(target_in, Y4, verbose=0) == pytest.approx(reference, rel=1e-5)
    weights = np.array([1.0, 2.0, 0.0, 1.0], "float32")
    weighted = _keras_reference(Y4, logits, weights[:, None] * REAL4 * keras_mask)
    assert model.evaluate(target_in, Y4, sample_weight=weights, verbose=0) == pytest.approx(
        weighted, rel=1e-5)


def _rnn_batch():
    from kerasseq.models import build_rnn_seq2seq

    keras.utils.set_random_seed(1)
    model = build_rnn_seq2seq(20, 11, embedding_dim=8, units=8)
    source = np.random.default_rng(1).integers(4, 20, size=(4, 5)).astype("int32")
    target_in = np.concatenate([np.full((4, 1), 2), Y4[:, :-1]], 1).astype("int32")
    return model, (source, target_in)


def test_evaluate_with_sample_weight_equals_keras_cross_entropy_and_accuracy():
    model, x = _rnn_batch()
    logits = model.predict(x, verbose=0)
    row_weights = np.array([1.0, 0.0, 2.0, 0.5], "float32")
    token_weights = np.random.default_rng(7).uniform(0.0, 2.0, size=(4, 4)).astype("float32")
    for weights, per_token in ((row_weights, row_weights[:, None] * REAL4),
                               (token_weights, token_weights * REAL4)):
        model.compile(loss=MaskedSparseCategoricalCrossentropy(),
                      weighted_metrics=[MaskedTokenAccuracy()])
        ours = model.evaluate(x, Y4, sample_weight=weights, verbose=0, return_dict=True)
        assert ours["loss"] == pytest.approx(_keras_reference(Y4, logits, per_token), rel=1e-5)
        accuracy = keras.metrics.SparseCategoricalAccuracy()
        accuracy.update_state(Y4, logits, sample_weight=per_token)
        assert ours["token_accuracy"] == pytest.approx(float(accuracy.result()), rel=1e-6)
        # Keras' own loss, compiled on the same model with the padding as weights
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"))
        keras_loss = model.evaluate(x, Y4, sample_weight=per_token, verbose=0,
                                    return_dict=True)["loss"]
        assert keras_loss == pytest.approx(ours["loss"], rel=1e-5)


def test_masked_token_accuracy_weights_rows_not_positions():
    # 4 rows of 4 positions: a (batch,) weight once broadcast along the positions.
    logits = np.zeros((4, 4, 11), "float32")
    predicted = np.array([[5, 6, 1, 1], [1, 1, 1, 1], [4, 8, 9, 3], [1, 1, 1, 1]])
    np.put_along_axis(logits, predicted[..., None], 1.0, -1)
    metric = MaskedTokenAccuracy()
    metric.update_state(Y4, logits, sample_weight=[1.0, 0.0, 0.0, 0.0])  # row 0: 2 of 3 right
    assert float(metric.result()) == pytest.approx(2 / 3)
    metric.reset_state()
    metric.update_state(Y4, logits, sample_weight=[0.0, 1.0, 1.0, 0.0])  # 0 of 2, 4 of 4
    assert float(metric.result()) == pytest.approx(4 / 6)


def test_configs_saved_before_weights_keep_the_token_mean():
    old = {"name": "masked_sparse_categorical_crossentropy", "reduction": "sum",
           "label_smoothing": 0.1, "pad_id": 0, "from_logits": True}
    loss = MaskedSparseCategoricalCrossentropy.from_config(old)
    assert loss.reduction == "mean_with_sample_weight"
    logits = _logits4()
    assert float(loss(Y4, logits)) == pytest.approx(2.74778366, rel=1e-6)
    summed = MaskedSparseCategoricalCrossentropy(reduction="sum")
    assert MaskedSparseCategoricalCrossentropy.from_config(summed.get_config()).reduction == "sum"
    assert keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(
        MaskedSparseCategoricalCrossentropy())).reduction == "mean_with_sample_weight"


REPLICAS_SCRIPT = r'''
import json
import os

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import numpy as np  # noqa: E402

from kerasseq.training import MaskedSparseCategoricalCrossentropy  # noqa: E402

# Replica 0 gets rows 0-1 (7 real tokens), replica 1 rows 2-3 (2).
y = np.array([[5, 6, 7, 3], [8, 9, 3, 0], [3, 0, 0, 0], [3, 0, 0, 0]], "int32")
logits = np.random.default_rng(0).normal(size=(4, 4, 11)).astype("float32")
weights = {"none": None, "rows": np.array([1.0, 0.5, 2.0, 0.0], "float32"),
           "tokens": np.random.default_rng(1).uniform(0, 2, (4, 4)).astype("float32")}
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
report = {}
for reduction in ("mean_with_sample_weight", "sum_over_batch_size", "sum"):
    loss = MaskedSparseCategoricalCrossentropy(reduction=reduction)
    for name, weight in weights.items():
        def shard(context, weight=weight):
            rows = slice(2 * context.replica_id_in_sync_group, 2 * context.replica_id_in_sync_group + 2)
            return y[rows], logits[rows], None if weight is None else weight[rows]

        per_replica = strategy.run(tf.function(loss.__call__),
                                   args=strategy.experimental_distribute_values_from_function(shard))
        report[f"{reduction} {name}"] = [float(loss(y, logits, sample_weight=weight)),
                                         float(strategy.reduce("SUM", per_replica, axis=None))]
print(json.dumps(report))
'''


@pytest.mark.slow
def test_replicas_sum_to_the_one_device_loss_with_weights():
    # Each replica divides by the denominator of the global batch: the replicas'
    # values sum to the loss of the whole batch on one device, weights or not.
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow"}
    result = processes.run([sys.executable, "-c", REPLICAS_SCRIPT], forked=True, capture_output=True,
                           text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(report) == 9
    for name, (one_device, replicas) in report.items():
        assert replicas == pytest.approx(one_device, rel=1e-6), name


def test_a_guided_transformer_drops_a_row_of_weight_zero_from_both_terms():
    import tensorflow as tf

    from kerasseq.models import build_transformer_seq2seq

    keras.utils.set_random_seed(0)
    model = build_transformer_seq2seq(20, 20, num_layers=1, d_model=8, num_heads=2, dff=8,
                                      max_positions=8, guided_alignment_weight=0.5)
    model.compile(optimizer="sgd", loss=MaskedSparseCategoricalCrossentropy())
    x = {"source_ids": np.array([[5, 6, 7], [8, 9, 0]], "int32"),
         "target_in_ids": np.array([[2, 8, 9], [2, 10, 0]], "int32"),
         "alignment_links": np.array([[[1, 0, 0], [0, 0, 1], [0, 0, 0]],
                                      [[0, 1, 0], [1, 0, 0], [0, 0, 0]]], "int32")}
    y = np.array([[8, 9, 3], [10, 3, 0]], "int32")

    def evaluate(rows, sample_weight=None):
        batch = ({name: value[rows] for name, value in x.items()}, y[rows])
        if sample_weight is not None:
            batch += (sample_weight,)
        return model.evaluate(tf.data.Dataset.from_tensors(batch), verbose=0, return_dict=True)

    row_0 = evaluate(slice(0, 1))
    weighted = evaluate(slice(0, 2), np.array([1.0, 0.0], "float32"))
    for name in ("loss", "alignment_loss"):
        assert weighted[name] == pytest.approx(row_0[name], rel=1e-5), name
    assert evaluate(slice(0, 2))["alignment_loss"] != pytest.approx(row_0["alignment_loss"], rel=1e-3)


def test_sample_weights_of_another_batch_are_refused():
    loss = MaskedSparseCategoricalCrossentropy()
    with pytest.raises(ValueError, match=r"sample_weight must be a scalar.*targets are \(4, 4\).*"
                                         r"shape \(3,\)"):
        loss(Y4, _logits4(), sample_weight=np.ones(3))
    with pytest.raises(ValueError, match=r"shape \(4, 4, 1, 1\)"):
        MaskedTokenAccuracy().update_state(Y4, _logits4(), sample_weight=np.ones((4, 4, 1, 1)))
    assert float(loss(Y4, _logits4(), sample_weight=2.0)) == pytest.approx(float(loss(Y4, _logits4())))
