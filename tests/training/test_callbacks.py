import math

import keras
import numpy as np
import pytest

from kerasseq.models import build_rnn_seq2seq
from kerasseq.training import (
    DevBleuEarlyStopping,
    MaskedSparseCategoricalCrossentropy,
    NonFiniteLossError,
    ScheduledSampling,
    StopOnNonFiniteLoss,
    all_weights_finite,
    teacher_forcing_probability,
)


def test_schedules_follow_bengio_2015():
    assert teacher_forcing_probability("linear", 3, 0.1) == pytest.approx(0.7)
    assert teacher_forcing_probability("linear", 30, 0.1) == 0.0
    assert teacher_forcing_probability("exponential", 2, 0.9) == pytest.approx(0.81)
    assert teacher_forcing_probability("inverse_sigmoid", 5, 10.0) == pytest.approx(
        10 / (10 + math.exp(0.5))
    )


@pytest.fixture(scope="module")
def seq2seq():
    """A small compiled RNN seq2seq model, shared by the tests that fit it.

    Each test sets what it checks itself (the callbacks assign the decoder's
    sampling probability; TimeLimit counts epochs), so they can share one
    model and Keras' traced train function instead of building three.
    """
    # Seeded here: a module fixture is set up before the autouse seed of
    # tests/conftest.py, so its weights came from whatever the previous test
    # (of this file or another one on the same pytest-xdist worker) left.
    keras.utils.set_random_seed(1234)
    model = build_rnn_seq2seq(12, 12, embedding_dim=4, units=8)
    model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy())
    return model


def _data(rows):
    """`rows` copies of one (inputs, target) example."""
    source = np.array([[5, 6, 7]] * rows)
    target_in = np.array([[2, 8, 9]] * rows)
    target_out = np.array([[8, 9, 3]] * rows)
    return [source, target_in], target_out


def test_callback_sets_decoder_probability_each_epoch(seq2seq):
    model = seq2seq
    inputs, target_out = _data(4)
    callback = ScheduledSampling(schedule="linear", decay=0.1, max_probability=0.15)
    seen = []

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(float(model.decoder.sampling_probability.numpy()))

    model.fit(inputs, target_out, epochs=3, verbose=0, callbacks=[callback, Record()])
    np.testing.assert_allclose(seen, [0.0, 0.1, 0.15], atol=1e-6)
    assert callback.history == pytest.approx([0.0, 0.1, 0.15])


class _RecordProbability(keras.callbacks.Callback):
    """Reads the decoder's variable at each batch, after ScheduledSampling set it."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_batch_begin(self, batch, logs=None):
        self.seen.append(float(self.model.decoder.sampling_probability.numpy()))


def test_exponential_and_inverse_sigmoid_schedules_change_the_variable_during_fit(seq2seq):
    model = seq2seq
    inputs, target_out = _data(8)
    schedules = [  # Bengio et al. (2015): teacher-forcing probability ε_i at step i
        ("exponential", 0.5, lambda i: 0.5 ** i),
        ("inverse_sigmoid", 1.0, lambda i: 1.0 / (1.0 + math.exp(i))),
    ]
    for schedule, decay, teacher_forcing in schedules:
        callback = ScheduledSampling(schedule=schedule, decay=decay, max_probability=1.0,
                                     update="batch")
        record = _RecordProbability()
        model.fit(inputs, target_out, batch_size=2, epochs=1, verbose=0,
                  callbacks=[callback, record])  # 4 steps
        expected = [1.0 - teacher_forcing(i) for i in range(4)]
        np.testing.assert_allclose(record.seen, expected, atol=1e-6, err_msg=schedule)
        assert len(set(np.round(record.seen, 6))) == 4, schedule  # a new value every step


def test_bad_callback_arguments():
    with pytest.raises(ValueError, match="schedule"):
        ScheduledSampling(schedule="cosine")
    with pytest.raises(ValueError, match="decay"):
        ScheduledSampling(schedule="exponential", decay=2.0)


def test_time_limit_stops_fit_early(seq2seq):
    from kerasseq.training import TimeLimit

    model = seq2seq
    inputs, target_out = _data(4)
    limit = TimeLimit(seconds=1e-9)
    history = model.fit(inputs, target_out, epochs=50, batch_size=2, verbose=0,
                        callbacks=[limit])
    assert len(history.history["loss"]) == 1 and limit.stopped_at_epoch == 0
    with pytest.raises(ValueError, match="seconds"):
        TimeLimit(0)


def _regression(num_rows=40):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.random.default_rng(0).normal(size=(num_rows, 4)).astype("float32")
    return model, x, x.sum(axis=1, keepdims=True)


def test_stop_on_non_finite_loss_raises_before_the_epoch_is_recorded(tmp_path):
    model, x, y = _regression()
    x[19, 0] = np.nan  # batch 3 of every epoch (batches of 8 rows)
    history = tmp_path / "history.csv"
    recorded = []
    record = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: recorded.append(epoch))
    with pytest.raises(NonFiniteLossError, match="became nan at epoch 1, batch 3") as raised:
        model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                  callbacks=[StopOnNonFiniteLoss(), keras.callbacks.CSVLogger(str(history)),
                             record])
    assert (raised.value.epoch, raised.value.batch) == (1, 3) and np.isnan(raised.value.value)
    assert recorded == []  # the callbacks after it never saw the broken epoch
    assert not history.exists() or "nan" not in history.read_text()
    # Keras' TerminateOnNaN, for contrast, lets the epoch end and be recorded.
    model, x, y = _regression()
    x[19, 0] = np.nan
    model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
              callbacks=[keras.callbacks.TerminateOnNaN(), record])
    assert recorded == [0]


def test_stop_on_non_finite_loss_checks_weights_and_validation_at_epoch_end():
    model, x, y = _regression()
    callback = StopOnNonFiniteLoss()
    callback.set_model(model)
    callback.on_epoch_end(0, {"loss": 0.5, "val_loss": 0.7})  # finite: nothing happens
    with pytest.raises(NonFiniteLossError, match="val_loss of epoch 2 is inf"):
        callback.on_epoch_end(1, {"loss": 0.5, "val_loss": float("inf")})
    assert all_weights_finite(model)
    kernel = model.layers[0].kernel
    kernel.assign(np.full(kernel.shape, np.nan, "float32"))
    assert not all_weights_finite(model)
    with pytest.raises(NonFiniteLossError, match="weights hold NaN or inf after epoch 1"):
        callback.on_epoch_end(0, {"loss": 0.5})


DEV_REFERENCES = ["the cat sat on the mat today", "a dog ran in the park"]
# dev BLEU per epoch: low, 100 (best), 0, low, 100: patience 2 stops after epoch 4
SCRIPTED_DEV = [["the cat", "a dog"], list(DEV_REFERENCES), ["x", "y"], ["the cat", "a dog"],
                list(DEV_REFERENCES)]


def _scripted_dev_model():
    """A regression model whose `translate` returns SCRIPTED_DEV's outputs in turn:
    `(model, x, y, calls, weights, epoch_weights)`; `calls` records each call's
    arguments, and the callback `epoch_weights` appends each epoch's weights."""
    model, x, y = _regression()
    calls, weights = [], []

    def translate(sources, method, batch_size, **search):
        calls.append((list(sources), method, batch_size, search))
        return SCRIPTED_DEV[len(calls) - 1]

    class EpochWeights(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            weights.append(self.model.get_weights())

    model.translate = translate
    return model, x, y, calls, weights, EpochWeights()


def test_dev_bleu_early_stopping_logs_stops_and_restores_the_best_weights(capsys):
    model, x, y, calls, weights, epoch_weights = _scripted_dev_model()
    references = DEV_REFERENCES
    stopper = DevBleuEarlyStopping(["s1", "s2"], references, patience=2, batch_size=7,
                                   max_length=9)
    history = model.fit(x, y, epochs=10, batch_size=8, verbose=0,
                        callbacks=[epoch_weights, stopper])
    assert history.epoch == [0, 1, 2, 3]
    assert history.history["dev_bleu"][1] == pytest.approx(100.0)
    assert history.history["dev_bleu"][2] == pytest.approx(0.0)
    assert stopper.best == pytest.approx(100.0) and stopper.best_epoch == 2
    assert calls[0] == (["s1", "s2"], "greedy", 7, {"max_length": 9})
    for restored, best in zip(model.get_weights(), weights[1], strict=True):
        np.testing.assert_array_equal(restored, best)
    assert "epoch 2: dev BLEU 100.00" in capsys.readouterr().out
    with pytest.raises(ValueError, match="same length"):
        DevBleuEarlyStopping(["a"], [], patience=1)
    with pytest.raises(ValueError, match="patience"):
        DevBleuEarlyStopping(["a"], ["b"], patience=0)


def test_best_epoch_of_is_the_epoch_the_callback_keeps():
    """All five scripted epochs (patience 5): 100 after epochs 2 and 5, a tie the
    callback resolves to epoch 2; `best_epoch_of` on the logged scores agrees."""
    model, x, y, _, weights, epoch_weights = _scripted_dev_model()
    stopper = DevBleuEarlyStopping(["s1", "s2"], DEV_REFERENCES, patience=5, verbose=0)
    scores = model.fit(x, y, epochs=5, batch_size=8, verbose=0,
                       callbacks=[epoch_weights, stopper]).history["dev_bleu"]
    assert scores[1] == scores[4] == pytest.approx(100.0)
    assert stopper.best_epoch == DevBleuEarlyStopping.best_epoch_of(scores) == 2
    np.testing.assert_array_equal(model.get_weights()[0], weights[1][0])
    assert DevBleuEarlyStopping.best_epoch_of([]) is None
    assert DevBleuEarlyStopping.best_epoch_of([1.0, 3.0, 2.0]) == 2


def test_dev_bleu_early_stopping_resumed_stops_and_restores_as_an_uninterrupted_run():
    """Epochs 1-2 in one fit, the rest in a resumed one (initial_epoch=2): the
    scores of the same script as above stop it after epoch 4 again, and the
    weights put back are those of epoch 2, which only the first fit saw."""
    model, x, y, _, weights, epoch_weights = _scripted_dev_model()
    references = DEV_REFERENCES
    first = DevBleuEarlyStopping(["s1", "s2"], references, patience=2, verbose=0)
    scores = model.fit(x, y, epochs=2, batch_size=8, verbose=0,
                       callbacks=[epoch_weights, first]).history["dev_bleu"]
    model.set_weights(weights[1])  # what a checkpoint of epoch 2 holds
    stopper = DevBleuEarlyStopping(["s1", "s2"], references, patience=2, verbose=0)
    stopper.resume(scores, best_weights=weights[1])
    history = model.fit(x, y, epochs=10, initial_epoch=2, batch_size=8, verbose=0,
                        callbacks=[epoch_weights, stopper])
    assert history.epoch == [2, 3]  # stopped after epoch 4, as without the break
    assert stopper.best == pytest.approx(100.0) and stopper.best_epoch == 2
    for restored, best in zip(model.get_weights(), weights[1], strict=True):
        np.testing.assert_array_equal(restored, best)
    assert not np.array_equal(weights[3][0], weights[1][0])  # training did move them

    fresh = DevBleuEarlyStopping(["s1"], ["a"], patience=3)
    fresh.on_train_begin()  # no resume: a fresh start
    assert (fresh.best, fresh.best_epoch, fresh.wait) == (-1.0, None, 0)
    fresh.resume([3.0, 5.0, 5.0, 4.0], best_weights=weights[0])
    fresh.on_train_begin()
    assert (fresh.best, fresh.best_epoch, fresh.wait) == (5.0, 2, 2)  # a tie is no gain
    np.testing.assert_array_equal(fresh.best_weights[0], weights[0][0])
    fresh.on_train_begin()  # the resumed state serves one fit only
    assert fresh.best_epoch is None
    with pytest.raises(ValueError, match="stopped early already"):
        fresh.resume([5.0, 4.0, 4.0, 4.0], best_weights=weights[0])
    with pytest.raises(ValueError, match="finite dev BLEU"):
        fresh.resume([], best_weights=weights[0])
    with pytest.raises(ValueError, match="best_weights"):
        fresh.resume([1.0], best_weights=None)

