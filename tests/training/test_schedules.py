import numpy as np
import pytest

from kerasseq.training import TransformerSchedule


def test_warmup_then_inverse_sqrt():
    schedule = TransformerSchedule(d_model=128, warmup_steps=100)
    # Optimizer iterations start at 0; the paper counts steps from 1.
    for iteration in (0, 49, 99, 100, 399, 4000):
        step = iteration + 1
        expected = 128 ** -0.5 * min(step ** -0.5, step * 100 ** -1.5)
        assert float(schedule(iteration)) == pytest.approx(expected, rel=1e-5)
    rates = [float(schedule(i)) for i in range(300)]
    assert int(np.argmax(rates)) == 99


def test_config_and_errors():
    schedule = TransformerSchedule(64, 10, scale=2.0)
    assert TransformerSchedule.from_config(schedule.get_config()).scale == 2.0
    with pytest.raises(ValueError, match="warmup_steps"):
        TransformerSchedule(64, 0)
