"""`fit` traces the training step once: the training state is built before the trace.

Keras' TensorFlow trainer, without a distribution strategy, creates the
optimizer's and the compiled metrics' variables inside the first trace of the
training step, and `tf.function` then traces the step a second time.
`Seq2SeqModel._build_training_state` builds them first with Keras' private
`Trainer._symbolic_build` (what Keras itself does under a strategy); the
canary below names the Keras behaviour this rests on.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq
from kerasseq.models.base import Seq2SeqModel
from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy
from kerasseq.training.trainer import DistributedTrainer

RNG = np.random.default_rng(0)
SOURCE = RNG.integers(1, 12, (16, 5)).astype("int32")
TARGET_IN = RNG.integers(1, 12, (16, 4)).astype("int32")
TARGET_OUT = RNG.integers(1, 12, (16, 4)).astype("int32")


def test_keras_symbolic_build_is_what_saves_the_second_trace():
    """Canary: (1) Keras' TF trainer still traces a fresh model's `train_step`
    twice in its first `fit` (its variables are created in the first trace);
    (2) `Trainer._symbolic_build(data_batch=...)` builds the optimizer, loss and
    metrics from one batch's shapes, after which `fit` traces once. When a
    Keras release changes either, this test says which: with (1) gone the hook
    is no longer needed, with (2) gone kerasseq's call to it must change."""
    traces = []

    class Probe(keras.Model):
        def train_step(self, data):
            traces.append(1)
            return super().train_step(data)

    def probe():
        keras.utils.set_random_seed(0)
        inputs = keras.Input((5,), dtype="int32")
        hidden = keras.layers.GRU(4)(keras.layers.Embedding(12, 3)(inputs))
        model = Probe(inputs, keras.layers.Dense(12)(hidden))
        model.compile(optimizer="adam", metrics=["accuracy"],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    model = probe()
    model.fit(SOURCE, TARGET_OUT[:, 0], batch_size=8, verbose=0)
    assert len(traces) == 2, f"Keras traced train_step {len(traces)} time(s) in a first fit"
    traces.clear()
    model = probe()
    model._symbolic_build(data_batch=(SOURCE, TARGET_OUT[:, 0]))
    assert model.optimizer.built
    model.fit(SOURCE, TARGET_OUT[:, 0], batch_size=8, verbose=0)
    assert len(traces) == 1, f"train_step traced {len(traces)} times after _symbolic_build"


def _model(kind):
    keras.utils.set_random_seed(0)
    if kind == "transformer":
        model = build_transformer_seq2seq(12, 12, num_layers=1, d_model=8, num_heads=2, dff=16,
                                          dropout=0.1, max_positions=8)
    else:
        model = build_rnn_seq2seq(12, 12, embedding_dim=4, units=8, attention="bahdanau",
                                  dropout=0.1)
    model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy(),
                  metrics=[MaskedTokenAccuracy()])
    return model


def _data(kind):
    if kind == "numpy":
        return ((SOURCE, TARGET_IN), TARGET_OUT), {"batch_size": 8}
    keras.utils.set_random_seed(0)  # the same shuffled order for both fits
    dataset = tf.data.Dataset.from_tensor_slices(((SOURCE, TARGET_IN), TARGET_OUT))
    return (dataset.shuffle(16, seed=3).batch(8),), {}


@pytest.fixture
def traces(monkeypatch):
    """A list that grows by one each time `Seq2SeqModel.train_step` is traced."""
    calls = []
    train_step = Seq2SeqModel.train_step

    def counted(self, batch):
        calls.append(1)
        return train_step(self, batch)

    monkeypatch.setattr(Seq2SeqModel, "train_step", counted)
    return calls


@pytest.mark.parametrize("kind,data,compare", [
    ("rnn", "dataset", True),
    pytest.param("transformer", "numpy", False, marks=pytest.mark.slow)])
def test_fit_traces_the_step_once_and_trains_as_before(kind, data, compare, traces,
                                                        monkeypatch):
    model = _model(kind)
    args, kwargs = _data(data)
    history = model.fit(*args, epochs=2, verbose=0, **kwargs).history
    assert len(traces) == 1
    if not compare:  # (one comparison is enough: the same Keras step, traced once or twice)
        return
    # Without the early build (Keras' own path: two traces) the same weights
    # and history: the second trace changed the CPU time, not the training.
    reference = _model(kind)
    monkeypatch.setattr(reference, "_build_training_state", lambda batch: None)
    args, kwargs = _data(data)
    assert reference.fit(*args, epochs=2, verbose=0, **kwargs).history == history
    assert len(traces) == 3
    for ours, theirs in zip(model.weights, reference.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=ours.path)


def test_distributed_trainer_traces_the_step_once(traces):
    model = _model("rnn")
    dataset = tf.data.Dataset.from_tensor_slices(((SOURCE, TARGET_IN), TARGET_OUT)).batch(8)
    history = DistributedTrainer(model).fit(dataset, epochs=2, verbose=0).history
    assert len(traces) == 1 and len(history["loss"]) == 2
    assert model.optimizer.built


def test_a_bad_batch_gets_the_error_keras_gives(monkeypatch):
    """Targets one token short: the error is Keras' own, as without the early build."""
    errors = []
    for early in (True, False):
        model = _model("rnn")
        if not early:
            monkeypatch.setattr(model, "_build_training_state", lambda batch: None)
        with pytest.raises(Exception) as caught:  # noqa: PT011  (compared below)
            model.fit((SOURCE, TARGET_IN), TARGET_OUT[:, :3], batch_size=8, verbose=0)
        errors.append((type(caught.value), str(caught.value).split("\n")[0]))
    assert errors[0] == errors[1], errors
