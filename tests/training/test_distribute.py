"""One training step under MirroredStrategy over 2 CPU devices == one step on one device.

The CPU is split into two logical devices, which must happen before
TensorFlow initialises its devices, so the comparison runs in a fresh
subprocess (this test process keeps its single CPU device).

The batch is split unevenly in real target tokens (7 on replica 0, 2 on
replica 1): the step is only exact if the loss is the *global* token-mean
(see `MaskedSparseCategoricalCrossentropy` and docs/distributed.md). Plain SGD
is used because its update is proportional to the gradient, so a wrongly
scaled loss shows in the weights (Adam's first step would hide it).
"""

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy
from kerasseq.training.distribute import get_strategy, pad_batches_to_multiple
from tests import processes

SCRIPT = r'''
import json
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf

# Full float32 as in tests/conftest.py: on a GPU the one-device step runs there.
tf.config.experimental.enable_tensor_float_32_execution(False)
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])

import keras  # noqa: E402
import numpy as np  # noqa: E402

from kerasseq.models import build_rnn_seq2seq  # noqa: E402
from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy  # noqa: E402
from kerasseq.training.distribute import get_strategy, pad_batches_to_multiple  # noqa: E402

# Replica 0 gets rows 0-1 (7 real target tokens), replica 1 rows 2-3 (2 tokens).
source = np.array([[5, 6, 7, 8, 9], [6, 7, 8, 9, 0], [5, 6, 0, 0, 0], [7, 0, 0, 0, 0]], "int32")
target_in = np.array([[2, 5, 6, 7], [2, 8, 9, 0], [2, 0, 0, 0], [2, 0, 0, 0]], "int32")
target_out = np.array([[5, 6, 7, 3], [8, 9, 3, 0], [3, 0, 0, 0], [3, 0, 0, 0]], "int32")


def dataset(rows=4):
    return tf.data.Dataset.from_tensor_slices(
        ((source[:rows], target_in[:rows]), target_out[:rows])).batch(4)


def compiled_model(strategy, initial_weights=None, clipnorm=None):
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = build_rnn_seq2seq(12, 12, embedding_dim=4, units=8, attention="bahdanau")
        if initial_weights is not None:
            model.set_weights(initial_weights)
        model.compile(optimizer=keras.optimizers.SGD(0.5, clipnorm=clipnorm),
                      loss=MaskedSparseCategoricalCrossentropy(),
                      metrics=[MaskedTokenAccuracy()])
    return model


def one_step(model, initial, data):
    """One `fit` step from the weights `initial`: (weights after it, its reported loss).

    Plain SGD has no slots and no schedule, so a compiled model is reused from
    `initial` (its traced train function too, where the batch shapes allow).
    """
    model.set_weights(initial)
    loss = model.fit(data, epochs=1, verbose=0).history["loss"][0]
    return [w.numpy() for w in model.weights], loss


def max_diff(first, second):
    return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
               for a, b in zip(first, second, strict=True))


single = compiled_model(get_strategy("default"))
initial = [w.numpy() for w in single.weights]
before = float(MaskedSparseCategoricalCrossentropy()(target_out, single([source, target_in])))
single_weights, single_loss = one_step(single, initial, dataset())
single_eval = single.evaluate(dataset(), verbose=0, return_dict=True)
strategy = get_strategy("mirrored", devices=["/cpu:0", "/cpu:1"])
mirrored = compiled_model(strategy, initial)
mirrored_weights, mirrored_loss = one_step(mirrored, initial, dataset())
mirrored_eval = mirrored.evaluate(dataset(), verbose=0, return_dict=True)
# A batch of 3 rows does not split evenly over 2 replicas: Keras needs it padded.
odd_single_weights, odd_single_loss = one_step(single, initial, dataset(3))
odd_mirrored_weights, odd_mirrored_loss = one_step(
    mirrored, initial, pad_batches_to_multiple(dataset(3), 2))
# Clipping active (the gradient norms are far above 0.05): all-reduce first, then clip.
clip_single_weights, clip_single_loss = one_step(
    compiled_model(get_strategy("default"), initial, clipnorm=0.05), initial, dataset())
clip_mirrored_weights, clip_mirrored_loss = one_step(
    compiled_model(strategy, initial, clipnorm=0.05), initial, dataset())
# Mixed precision (a LossScaleOptimizer around SGD): unscale, clip as the inner optimizer, rescale.
keras.mixed_precision.set_global_policy("mixed_float16")
mixed_single_weights, _ = one_step(
    compiled_model(get_strategy("default"), initial, clipnorm=0.05), initial, dataset())
mixed_mirrored = compiled_model(strategy, initial, clipnorm=0.05)
mixed_mirrored_weights, _ = one_step(mixed_mirrored, initial, dataset())
keras.mixed_precision.set_global_policy("float32")
print(json.dumps({
    "mixed_optimizer": type(mixed_mirrored.optimizer).__name__,
    "mixed_max_weight_diff": max_diff(mixed_single_weights, mixed_mirrored_weights),
    "clip_max_weight_diff": max_diff(clip_single_weights, clip_mirrored_weights),
    "clip_vs_unclipped": max_diff(clip_single_weights, single_weights),
    "clip_single_loss": clip_single_loss,
    "clip_mirrored_loss": clip_mirrored_loss,
    "replicas": strategy.num_replicas_in_sync,
    "loss_before": before,
    "single_loss": single_loss, "mirrored_loss": mirrored_loss,
    "single_eval": single_eval, "mirrored_eval": mirrored_eval,
    "max_weight_diff": max_diff(single_weights, mirrored_weights),
    "odd_single_loss": odd_single_loss,
    "odd_mirrored_loss": odd_mirrored_loss,
    "odd_max_weight_diff": max_diff(odd_single_weights, odd_mirrored_weights),
    "max_update": max_diff(single_weights, initial),
}))
'''


@pytest.mark.slow
def test_mirrored_step_matches_single_device_step():
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow"}
    # A deadline, not an expected time (the script takes under a minute idle):
    # minutes, so that a loaded machine does not fail the test (issue 44).
    result = processes.run([sys.executable, "-c", SCRIPT], forked=True, capture_output=True, text=True,
                            timeout=1200, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["replicas"] == 2
    # The reported training loss is the global token-mean before the step ...
    assert report["single_loss"] == pytest.approx(report["loss_before"], abs=1e-5)
    assert report["mirrored_loss"] == pytest.approx(report["single_loss"], abs=1e-5)
    # ... the update is the same (and not negligible) ...
    # Relative to the update (0.18 here): on the CPU the two differ by ~4e-9, on a
    # GPU host (one-device step on the GPU, replicas on the CPU) by 1.3e-5, while a
    # loss divided by each replica's own token count gives 0.38 (odd batch: 0.41).
    assert report["max_update"] > 1e-2
    tolerance = 1e-3 * report["max_update"]
    assert report["max_weight_diff"] < tolerance
    # ... with a batch padded to a multiple of the replicas as well ...
    assert report["odd_max_weight_diff"] < tolerance
    # ... with gradient clipping active (all-reduced first, then clipped) ...
    assert report["clip_vs_unclipped"] > 1e-2
    assert report["clip_max_weight_diff"] < 1e-6
    assert report["clip_mirrored_loss"] == pytest.approx(report["clip_single_loss"], abs=1e-5)
    # ... under mixed precision too (float16 compute: a looser bound; clipping each
    # replica's share instead of the global gradient gave 0.02 here) ...
    assert report["mixed_optimizer"] == "LossScaleOptimizer"
    assert report["mixed_max_weight_diff"] < 1e-4
    # ... and evaluation after the step agrees too.
    for name in ("loss", "token_accuracy"):
        assert report["mirrored_eval"][name] == pytest.approx(report["single_eval"][name], abs=1e-5)


def test_get_strategy_names():
    assert get_strategy("default").num_replicas_in_sync == 1
    assert get_strategy("auto").num_replicas_in_sync == 1  # no GPU here
    with pytest.raises(ValueError, match="name must be one of"):
        get_strategy("tpu")
    with pytest.raises(ValueError, match="devices applies to"):
        get_strategy("default", devices=["/cpu:0"])


def test_pad_batches_to_multiple_adds_neutral_rows():
    source = np.array([[5, 6, 0], [7, 8, 9], [5, 0, 0]], "int32")
    target_in = np.array([[2, 5], [2, 6], [2, 7]], "int32")
    target_out = np.array([[5, 3], [6, 3], [7, 0]], "int32")
    dataset = tf.data.Dataset.from_tensors(((source, target_in), target_out))
    (padded_source, padded_in), padded_out = next(iter(pad_batches_to_multiple(dataset, 4)))
    np.testing.assert_array_equal(padded_source, np.concatenate([source, source[:1]]))
    np.testing.assert_array_equal(padded_in, np.concatenate([target_in, target_in[:1]]))
    np.testing.assert_array_equal(padded_out, np.concatenate([target_out, [[0, 0]]]))
    logits = np.random.default_rng(0).normal(size=(4, 2, 10)).astype("float32")
    loss = MaskedSparseCategoricalCrossentropy()
    assert float(loss(padded_out, logits)) == pytest.approx(float(loss(target_out, logits[:3])))
    accuracy = MaskedTokenAccuracy()
    accuracy.update_state(padded_out, logits)
    assert float(accuracy.result()) == pytest.approx(
        float(np.mean(logits[:3].argmax(-1)[target_out != 0] == target_out[target_out != 0])))
    assert pad_batches_to_multiple(dataset, 1) is dataset
    with pytest.raises(ValueError, match="multiple must be >= 1"):
        pad_batches_to_multiple(dataset, 0)
