import math

import keras
import numpy as np
import pytest

from kerasseq.models import build_rnn_seq2seq
from kerasseq.training import (
    MaskedSparseCategoricalCrossentropy,
    ScheduledSampling,
    teacher_forcing_probability,
)


def test_schedules_follow_bengio_2015():
    assert teacher_forcing_probability("linear", 3, 0.1) == pytest.approx(0.7)
    assert teacher_forcing_probability("linear", 30, 0.1) == 0.0
    assert teacher_forcing_probability("exponential", 2, 0.9) == pytest.approx(0.81)
    assert teacher_forcing_probability("inverse_sigmoid", 5, 10.0) == pytest.approx(
        10 / (10 + math.exp(0.5))
    )


def test_callback_sets_decoder_probability_each_epoch():
    model = build_rnn_seq2seq(12, 12, embedding_dim=4, units=8)
    model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy())
    callback = ScheduledSampling(schedule="linear", decay=0.1, max_probability=0.15)
    seen = []

    source = np.array([[5, 6, 7]] * 4)
    target_in = np.array([[2, 8, 9]] * 4)
    target_out = np.array([[8, 9, 3]] * 4)

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(float(model.decoder.sampling_probability.numpy()))

    model.fit([source, target_in], target_out, epochs=3, verbose=0, callbacks=[callback, Record()])
    np.testing.assert_allclose(seen, [0.0, 0.1, 0.15], atol=1e-6)
    assert callback.history == pytest.approx([0.0, 0.1, 0.15])


class _RecordProbability(keras.callbacks.Callback):
    """Reads the decoder's variable at each batch, after ScheduledSampling set it."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_batch_begin(self, batch, logs=None):
        self.seen.append(float(self.model.decoder.sampling_probability.numpy()))


def test_exponential_and_inverse_sigmoid_schedules_change_the_variable_during_fit():
    model = build_rnn_seq2seq(12, 12, embedding_dim=4, units=8)
    model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy())
    source = np.array([[5, 6, 7]] * 8)
    target_in = np.array([[2, 8, 9]] * 8)
    target_out = np.array([[8, 9, 3]] * 8)
    schedules = [  # Bengio et al. (2015): teacher-forcing probability ε_i at step i
        ("exponential", 0.5, lambda i: 0.5 ** i),
        ("inverse_sigmoid", 1.0, lambda i: 1.0 / (1.0 + math.exp(i))),
    ]
    for schedule, decay, teacher_forcing in schedules:
        callback = ScheduledSampling(schedule=schedule, decay=decay, max_probability=1.0,
                                     update="batch")
        record = _RecordProbability()
        model.fit([source, target_in], target_out, batch_size=2, epochs=1, verbose=0,
                  callbacks=[callback, record])  # 4 steps
        expected = [1.0 - teacher_forcing(i) for i in range(4)]
        np.testing.assert_allclose(record.seen, expected, atol=1e-6, err_msg=schedule)
        assert len(set(np.round(record.seen, 6))) == 4, schedule  # a new value every step


def test_bad_callback_arguments():
    with pytest.raises(ValueError, match="schedule"):
        ScheduledSampling(schedule="cosine")
    with pytest.raises(ValueError, match="decay"):
        ScheduledSampling(schedule="exponential", decay=2.0)


def test_time_limit_stops_fit_early():
    from kerasseq.training import TimeLimit

    model = build_rnn_seq2seq(12, 12, embedding_dim=4, units=8)
    model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy())
    source = np.array([[5, 6, 7]] * 4)
    target_in = np.array([[2, 8, 9]] * 4)
    target_out = np.array([[8, 9, 3]] * 4)
    limit = TimeLimit(seconds=1e-9)
    history = model.fit([source, target_in], target_out, epochs=50, batch_size=2, verbose=0,
                        callbacks=[limit])
    assert len(history.history["loss"]) == 1 and limit.stopped_at_epoch == 0
    with pytest.raises(ValueError, match="seconds"):
        TimeLimit(0)
