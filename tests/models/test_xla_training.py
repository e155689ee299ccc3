"""Every model trains under XLA (`compile(jit_compile=True)`), built with its tokenizers.

Keras silently falls back to `jit_compile=False` (with a warning) when a layer
vetoes XLA, and `jit_compile="auto"` turns XLA on only where TensorFlow reports
an accelerator, so the CPU CI would never notice a model that does not compile
on a GPU. These tests force XLA on the CPU and check that it is really used,
that it trains (numpy inputs, length-bucketed batches) and that one XLA step is
the same step as without XLA.
"""

import functools
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasseq.data import TextTokenizer, make_dataset
from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq
from kerasseq.training import MaskedSparseCategoricalCrossentropy

WORDS = ["cat", "act", "tact", "at", "a", "cattac", "tac", "ca", "attaccat", "t",
         "dog", "god", "good", "odd", "do", "cod", "coat", "toga", "goat", "dot"]
PAIRS = [(word, word[::-1].upper()) for word in WORDS]  # 20 pairs: batches of 8, 8, 4
SOURCE_TOKENIZER = TextTokenizer.from_texts(WORDS, split="character")
TARGET_TOKENIZER = TextTokenizer.from_texts([target for _, target in PAIRS], split="character")

MODELS = {
    "rnn-bahdanau": dict(kind="rnn", attention="bahdanau"),
    "rnn-luong": dict(kind="rnn", attention="luong"),
    "rnn-luong_dot": dict(kind="rnn", attention="luong_dot", encoder_units=4),  # 2 x 4 = units
    "rnn-luong_concat": dict(kind="rnn", attention="luong_concat"),
    "rnn-no-attention": dict(kind="rnn", attention=None),
    "rnn-scheduled-sampling": dict(kind="rnn", attention="bahdanau", sampling_probability=0.3),
    "transformer": dict(kind="transformer"),
}


def build(name, dropout=0.1):
    settings = dict(MODELS[name])
    tokenizers = dict(source_tokenizer=SOURCE_TOKENIZER, target_tokenizer=TARGET_TOKENIZER)
    if settings.pop("kind") == "rnn":
        return build_rnn_seq2seq(embedding_dim=8, units=8, dropout=dropout, **tokenizers,
                                 **settings)
    return build_transformer_seq2seq(num_layers=1, d_model=8, num_heads=2, dff=16,
                                     dropout=dropout, max_positions=16, **tokenizers)


@functools.cache
def bucketed_batches():
    """Two batches of 8 from two length buckets: two shapes, each its own XLA program."""
    return make_dataset(PAIRS, SOURCE_TOKENIZER, TARGET_TOKENIZER, batch_size=8,
                        shuffle=False, bucket_boundaries=[4]).take(2)


@functools.cache
def built(name):
    """`build(name)` (with dropout) once per module: the bucketed-batches test
    trains it, the `jit_compile="auto"` test only compiles it."""
    return build(name)


@functools.cache
def arrays():
    """All pairs as one padded batch of numpy arrays (made once: read only)."""
    dataset = make_dataset(PAIRS, SOURCE_TOKENIZER, TARGET_TOKENIZER, batch_size=len(PAIRS),
                           shuffle=False)
    (source, target_in), target_out = next(iter(dataset))
    return source.numpy(), target_in.numpy(), target_out.numpy()


def compile_model(model, jit_compile, learning_rate=0.1, run_eagerly=False):
    model.compile(optimizer=keras.optimizers.SGD(learning_rate),
                  loss=MaskedSparseCategoricalCrossentropy(), jit_compile=jit_compile,
                  run_eagerly=run_eagerly)


def jit_warnings(caught):
    return [str(w.message) for w in caught if "jit_compile" in str(w.message)]


@pytest.mark.parametrize("name", [name if name in ("rnn-bahdanau", "transformer")
                                  else pytest.param(name, marks=pytest.mark.slow)
                                  for name in MODELS])
def test_one_xla_step_on_numpy_inputs_equals_one_step_without_xla(name):
    source, target_in, target_out = arrays()
    loss = MaskedSparseCategoricalCrossentropy()
    results = {}
    # One model, the same initial weights for both steps (compile starts a new
    # optimizer and a new train function).
    model = build(name, dropout=0.0)
    initial = model.get_weights()
    loss_before = float(loss(target_out, model([source, target_in], training=False)))
    if MODELS[name].get("sampling_probability"):
        same_coins(model.decoder, target_in)
    for jit_compile in (False, True):
        model.set_weights(initial)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # The step without XLA runs eagerly: the same `train_step`, and no
            # (costly) trace of a second, non-XLA graph just to compare with.
            compile_model(model, jit_compile=jit_compile, learning_rate=0.5,
                          run_eagerly=not jit_compile)
            # numpy inputs: the batch dimension of the traced step is unknown
            history = model.fit([source, target_in], target_out, batch_size=len(source),
                                epochs=1, shuffle=False, verbose=0)
        assert jit_warnings(caught) == []
        assert model.jit_compile is jit_compile  # XLA was not silently turned off
        assert model.run_eagerly is not jit_compile
        after = float(loss(target_out, model([source, target_in], training=False)))
        results[jit_compile] = history.history["loss"][0], after, model.get_weights()
    plain_step, plain_after, plain_weights = results[False]
    xla_step, xla_after, xla_weights = results[True]
    assert np.isfinite(xla_step) and np.isfinite(xla_after)
    # the step changed the weights and lowered the (teacher-forced) loss ...
    assert max(float(np.max(np.abs(w - w0)))
               for w, w0 in zip(xla_weights, initial, strict=True)) > 1e-3
    assert xla_after < loss_before - 1e-3
    # ... and it is the step taken without XLA
    assert xla_step == pytest.approx(plain_step, abs=1e-4)
    assert xla_after == pytest.approx(plain_after, abs=1e-4)
    for a, b in zip(plain_weights, xla_weights, strict=True):
        np.testing.assert_allclose(b, a, atol=1e-4)


# The attention variants differ only in their score function, which the numpy
# step test above covers for each; bucketed batches (a new XLA program per
# shape) are checked on one RNN with and one without scheduled sampling and
# on the Transformer, to keep the suite's XLA compile time down.
@pytest.mark.slow
@pytest.mark.parametrize("name", ["rnn-bahdanau", "rnn-scheduled-sampling", "transformer"])
def test_trains_under_xla_on_bucketed_batches(name):
    model = built(name)  # with dropout
    compile_model(model, jit_compile=True)
    # Two buckets: batches of other shapes, each its own XLA program.
    dataset = bucketed_batches()
    shapes = [(tuple(s.shape), tuple(t.shape)) for (s, t), _ in dataset]
    assert len(set(shapes)) == 2, shapes
    # w.numpy(), not np.array(w): a Keras Variable's __array__ lacks NumPy 2's
    # `copy` argument (a DeprecationWarning).
    before = [np.array(w.numpy()) for w in model.trainable_weights]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(dataset, epochs=1, verbose=0)
    assert jit_warnings(caught) == []
    assert model.jit_compile is True
    assert np.isfinite(history.history["loss"][0])
    assert max(float(np.max(np.abs(a - b.numpy())))
               for a, b in zip(before, model.trainable_weights, strict=True)) > 1e-4


def same_coins(decoder, target_in):
    """Scheduled sampling with the same coin flips with and without XLA.

    `keras.random.uniform` draws other numbers under XLA from the same seed
    state, so the fed-back positions are fixed here (drawn once, as
    `GRUDecoder._sampling_coins` would, at `decoder.sampling_probability`).
    """
    rng = np.random.default_rng(0)
    coins = rng.random(target_in.T.shape) < decoder.sampling_probability
    coins[0] = False  # never the start token
    assert coins.any()

    def sampling_coins(target_in_ids, training):
        return tf.constant(coins if training else np.zeros_like(coins))

    decoder._sampling_coins = sampling_coins


def with_a_gpu(device_type=None):
    """`tf.config.list_physical_devices` of this machine plus one (fake) GPU."""
    devices = REAL_LIST_PHYSICAL_DEVICES() + [
        tf.config.PhysicalDevice(name="/physical_device:GPU:0", device_type="GPU")
    ]
    return [d for d in devices if device_type is None or d.device_type == device_type]


REAL_LIST_PHYSICAL_DEVICES = tf.config.list_physical_devices


@pytest.mark.parametrize("name", MODELS)
def test_auto_jit_compile_is_xla_on_a_gpu(name, monkeypatch):
    model = built(name)  # compile() replaces any earlier compile of it
    model.compile(optimizer="sgd", loss=MaskedSparseCategoricalCrossentropy())
    # no XLA on a CPU-only machine (the CI), XLA on a real GPU
    assert model.jit_compile is bool(tf.config.list_physical_devices("GPU"))
    monkeypatch.setattr(tf.config, "list_physical_devices", with_a_gpu)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.compile(optimizer="sgd", loss=MaskedSparseCategoricalCrossentropy())
    assert jit_warnings(caught) == []
    assert model.jit_compile is True
