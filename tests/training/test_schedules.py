import keras
import numpy as np
import pytest

from kerasseq.training import TransformerSchedule, transformer_optimizer


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


def _paper_rate(step, d_model, warmup_steps):
    """Vaswani et al. (2017), eq. (3), steps counted from 1."""
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def test_transformer_optimizer_follows_the_paper():
    optimizer = transformer_optimizer(64, warmup_steps=50, clipnorm=1.0)
    assert isinstance(optimizer, keras.optimizers.Adam)
    schedule = optimizer.get_config()["learning_rate"]  # the schedule, serialized
    assert schedule["class_name"] == "TransformerSchedule"
    assert schedule["config"] == {"d_model": 64, "warmup_steps": 50, "scale": 1.0}
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    assert optimizer.clipnorm == 1.0
    for step in (1, 50, 200):  # 1, warmup, 4 * warmup
        optimizer.iterations.assign(step - 1)  # the update of paper step s runs at iteration s - 1
        assert float(optimizer.learning_rate) == pytest.approx(_paper_rate(step, 64, 50), rel=1e-5)


def test_transformer_optimizer_is_saved_with_a_compiled_model(tmp_path):
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    model.compile(optimizer=transformer_optimizer(32, warmup_steps=10), loss="mse")
    model.fit(np.ones((4, 3)), np.zeros((4, 2)), batch_size=2, epochs=3, verbose=0)  # 6 steps
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    optimizer = loaded.optimizer
    assert isinstance(optimizer, keras.optimizers.Adam)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    assert int(optimizer.iterations.numpy()) == 6
    assert float(optimizer.learning_rate) == pytest.approx(_paper_rate(7, 32, 10), rel=1e-5)
    schedule = optimizer.get_config()["learning_rate"]
    assert schedule["class_name"] == "TransformerSchedule"
    assert schedule["config"] == {"d_model": 32, "warmup_steps": 10, "scale": 1.0}
