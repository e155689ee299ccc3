"""What every kerasseq model shares (`Seq2SeqModel`): checked for both models."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq
from tests.models.g2p_fixture import tiny_g2p

SOURCE_VOCAB_SIZE = 12
SOURCE = np.array([[5, 6, 7, 8, 0, 0], [9, 5, 0, 0, 0, 0], [6, 6, 6, 6, 6, 6]], "int32")

BUILDERS = {
    "rnn": lambda **kwargs: build_rnn_seq2seq(embedding_dim=6, units=8, **kwargs),
    "transformer": lambda **kwargs: build_transformer_seq2seq(
        num_layers=1, d_model=16, num_heads=4, dff=32, max_positions=16, **kwargs),
}


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def model(request):
    # A module fixture is set up before the autouse seed of tests/conftest.py:
    # unseeded, its weights came from whatever the previous test (of this
    # file or another one on the same pytest-xdist worker) left in the RNGs.
    keras.utils.set_random_seed(1234)
    return BUILDERS[request.param](source_vocab_size=SOURCE_VOCAB_SIZE, target_vocab_size=11)


@pytest.mark.parametrize("bad_value", [-1, SOURCE_VOCAB_SIZE, 10**6])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_out_of_range_source_ids_are_rejected_eagerly(model, bad_value, as_tensor):
    source = SOURCE.copy()
    source[1, 3] = bad_value
    source = tf.constant(source) if as_tensor else source
    message = (rf"source_ids must hold ids in the range \[0, {SOURCE_VOCAB_SIZE - 1}\].*"
               rf"source_ids\[1, 3\]={bad_value}")
    for method in ("greedy", "beam"):
        with pytest.raises(ValueError, match=message):
            model.generate(source, method=method, max_length=4)


def test_source_ids_at_the_edges_of_the_range_are_accepted(model):
    source = SOURCE.copy()
    source[0, 0], source[1, 1] = SOURCE_VOCAB_SIZE - 1, 1
    ids, scores, lengths = model.generate(source.astype("int64"), max_length=4)
    # The shared default, beam search with 4 beams; the n-best axis is always there.
    assert ids.shape == (3, 1, 4) and scores.shape == lengths.shape == (3, 1)
    assert np.all(np.isfinite(np.asarray(scores)))
    greedy_ids, greedy_scores, _ = model.generate(source, method="greedy", max_length=4)
    assert greedy_ids.shape == (3, 1, 4) and greedy_scores.shape == (3, 1)


def test_source_ids_must_be_integers(model):
    with pytest.raises(TypeError, match="source_ids must be integer token ids"):
        model.generate(SOURCE.astype("float32"), max_length=4)
    with pytest.raises(ValueError, match=r"\(batch_size, source_length\)"):
        model.generate(SOURCE[0], max_length=4)


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_beam_search_is_traced_once_across_batch_sizes_and_source_lengths(kind):
    entries, _, source_tokenizer, target_tokenizer = tiny_g2p()
    model = BUILDERS[kind](source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer)
    rng = np.random.default_rng(0)
    vocab_size = model.source_vocab_size

    def source_ids(batch_size, length):  # real ids, then padding on some rows
        ids = rng.integers(4, vocab_size, size=(batch_size, length))
        ids[0, length - 1:] = 0
        return ids

    search = dict(method="beam", num_beams=3, max_length=6)
    model.generate(source_ids(5, 3), **search)  # first call: traces
    translator = model.translator(method="beam", num_beams=3, max_length=6)
    traced = translator.trace_count  # the Translator compiles and counts traces
    # Batches of 5..8 rows share the pow2 bucket 8; sources of 3..8 tokens are padded to 8.
    for batch_size, length in [(5, 7), (6, 4), (7, 3), (8, 5), (7, 8)]:
        ids, _, _ = model.generate(source_ids(batch_size, length), **search)
        assert ids.shape == (batch_size, 1, 6)
    words = [w for w, _ in entries]
    for count in (5, 6, 7):  # translate goes through the same generate
        assert len(model.translate(words[:count], **search)) == count
    assert translator.trace_count == traced
    model.generate(source_ids(3, 5), **search)  # another bucket (4 rows): one new trace
    assert translator.trace_count == traced + 1


def test_mixed_precision_generate_is_finite():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        models = [build(source_vocab_size=SOURCE_VOCAB_SIZE, target_vocab_size=11)
                  for build in BUILDERS.values()]
    finally:
        keras.mixed_precision.set_global_policy("float32")
    for model in models:
        _, scores, _ = model.generate(SOURCE, method="beam", num_beams=2, max_length=4)
        assert np.all(np.isfinite(np.asarray(scores)))


# ------------------------------------------------------------ clone_model
def test_keras_clone_model_still_calls_what_kerasseq_overrides():
    """Canary for the one private Keras hook kerasseq keeps (`Seq2SeqModel`).

    `keras.models.clone_model` of a functional subclass whose constructor takes
    `*args, **kwargs` (1) runs the graph through `Functional._run_through_graph`
    with the cloned layers and (2) calls `type(model)(inputs, outputs, name=...)`
    with the tensors of that run. kerasseq's clone support rests on both; when
    a Keras release changes either, this test names what changed.
    """
    calls = []

    class Probe(keras.Model):
        def __init__(self, *args, **kwargs):
            calls.append(("init", len(args), sorted(kwargs)))
            super().__init__(*args, **kwargs)

        def _run_through_graph(self, inputs, *args, **kwargs):
            outputs = super()._run_through_graph(inputs, *args, **kwargs)
            calls.append(("run_through_graph", type(self).__name__))
            return outputs

    inputs = keras.Input((3,))
    model = Probe(inputs, keras.layers.Dense(2)(inputs), name="probe")
    calls.clear()
    clone = keras.models.clone_model(model)
    assert type(clone) is Probe, "clone_model no longer calls a functional subclass's constructor"
    assert ("run_through_graph", "Probe") in calls, (
        "clone_model no longer runs the graph through Functional._run_through_graph")
    init = [call for call in calls if call[0] == "init"]
    assert init == [("init", 2, ["name"])], (
        f"clone_model calls the constructor differently: {init} "
        "(kerasseq expects cls(inputs, outputs, name=...))")
    assert calls.index(("run_through_graph", "Probe")) < calls.index(init[0])


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_clone_model_keeps_the_class_the_tokenizers_and_the_contract(kind):
    entries, _, source_tokenizer, target_tokenizer = tiny_g2p()
    kwargs = {"share_embeddings": True} if kind == "transformer" else {}
    if kind == "transformer":  # one vocabulary for both sides
        kwargs.update(source_vocab_size=40, target_vocab_size=40)
    else:
        kwargs.update(source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer)
    model = BUILDERS[kind](**kwargs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    clone = keras.models.clone_model(model)

    assert type(clone) is type(model) and clone is not model
    assert clone.get_config() == model.get_config()
    assert clone.compiled  # Keras compiles the clone like the original
    assert [w.shape for w in clone.weights] == [w.shape for w in model.weights]
    # Fresh weights, as Keras documents: no variable is shared with the original.
    assert not {id(w) for w in clone.weights} & {id(w) for w in model.weights}
    kernels = [w for w in model.weights if "kernel" in w.path or "embeddings" in w.path]
    assert kernels and all(
        not np.array_equal(np.asarray(a), np.asarray(b))
        for a, b in zip(kernels, [w for w in clone.weights if "kernel" in w.path
                                  or "embeddings" in w.path], strict=True)
    )
    # Same weights → same logits, same decoding (the contract came along).
    clone.set_weights(model.get_weights())
    source = np.array([[5, 6, 7, 8, 0, 0], [9, 5, 0, 0, 0, 0]], "int32")
    target = np.array([[2, 5, 6], [2, 7, 0]], "int32")
    np.testing.assert_allclose(clone([source, target]), model([source, target]), atol=1e-6)
    for method in ("greedy", "beam"):
        np.testing.assert_array_equal(
            clone.generate(source, method=method, max_length=5)[0],
            model.generate(source, method=method, max_length=5)[0],
        )
    if kind == "rnn":
        words = [word for word, _ in entries[:3]]
        assert clone.source_tokenizer.get_vocabulary() == model.source_tokenizer.get_vocabulary()
        assert clone.translate(words, num_beams=2) == model.translate(words, num_beams=2)


def test_clone_model_applies_a_clone_function():
    model = BUILDERS["rnn"](source_vocab_size=SOURCE_VOCAB_SIZE, target_vocab_size=11)

    def copy_weights(layer):  # Keras' documented way of cloning with the weights
        new_layer = layer.__class__.from_config(layer.get_config())
        if getattr(layer, "weights", None):
            new_layer.build_from_config(layer.get_build_config())
            new_layer.set_weights(layer.get_weights())
        return new_layer

    clone = keras.models.clone_model(model, clone_function=copy_weights)
    assert type(clone) is type(model)
    for a, b in zip(clone.weights, model.weights, strict=True):
        np.testing.assert_array_equal(a, b)


def test_model_class_called_with_tensors_is_refused(model, request):
    # The class of the module's `model` fixture (rnn and transformer): no build of its own.
    kind = request.node.callspec.params["model"]
    model_class = type(model)
    inputs = keras.Input((None,), dtype="int32")
    outputs = keras.layers.Embedding(12, 4)(inputs)
    with pytest.raises(TypeError, match="only keras.models.clone_model"):
        model_class(inputs, outputs)
    with pytest.raises(TypeError, match="extra positional"):
        model_class(12, 11, 8, 8, 8, "bahdanau", None, True, 1, 0.0, False, 0.0, 64, False, None,
                    None, "extra") if kind == "rnn" else model_class(
            12, 11, 1, 16, 4, 32, 0.1, 16, None, False, False, False, 1e-5, 0.0, None, 0, None,
            None, "extra")


@pytest.mark.parametrize("kind, kwargs", [
    ("transformer", {"tie_output": True, "share_embeddings": True}),
    ("rnn", {"share_embeddings": True}),
])
def test_clone_model_of_models_sharing_weights(kind, kwargs):
    model = BUILDERS[kind](source_vocab_size=SOURCE_VOCAB_SIZE,
                           target_vocab_size=SOURCE_VOCAB_SIZE, **kwargs)
    clone = keras.models.clone_model(model)
    assert type(clone) is type(model) and clone.get_config() == model.get_config()
    assert len(clone.weights) == len(model.weights)  # the sharing came along
    clone.set_weights(model.get_weights())
    source = SOURCE[:2]
    target = np.array([[2, 5, 6], [2, 7, 0]], "int32")
    np.testing.assert_allclose(clone([source, target]), model([source, target]), atol=1e-6)


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_fit_and_evaluate_name_ids_beyond_the_vocabulary(kind):
    """A user's arrays with an id outside a vocabulary: `fit` and `evaluate` stop
    with the input, the vocabulary size and the batch's extreme ids, before the
    embedding lookup or the loss (which on a GPU would read zeros silently)."""
    keras.utils.set_random_seed(5)
    model = BUILDERS[kind](source_vocab_size=SOURCE_VOCAB_SIZE, target_vocab_size=11)
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    good = [SOURCE, np.array([[2, 4, 5, 0], [2, 6, 0, 0], [2, 7, 8, 9]], "int32"),
            np.array([[4, 5, 3, 0], [6, 3, 0, 0], [7, 8, 9, 3]], "int32")]
    history = model.fit(tuple(good[:2]), good[2], epochs=1, verbose=0)  # in range: trains
    assert np.isfinite(history.history["loss"][0])
    names = ["source_ids (x[0])", "target_in_ids (x[1])", "target_out_ids (y)"]
    sizes = [SOURCE_VOCAB_SIZE, 11, 11]
    for index, bad_id in [(0, SOURCE_VOCAB_SIZE + 7), (1, 11), (2, 40), (0, -1)]:
        arrays = [array.copy() for array in good]
        arrays[index][2, 1] = bad_id
        smallest, largest = min(bad_id, 0), max(bad_id, int(good[index].max()))
        side = "source" if index == 0 else "target"
        expected = (rf"{re.escape(names[index])} holds an id outside \[0, {sizes[index]}\) "
                    rf"\(the {side} vocabulary size is {sizes[index]}\)")
        with pytest.raises(tf.errors.InvalidArgumentError, match=expected) as raised:
            model.fit(tuple(arrays[:2]), arrays[2], epochs=1, verbose=0)
        assert f"[{smallest}] [{largest}]" in str(raised.value), str(raised.value)[:800]
        with pytest.raises(tf.errors.InvalidArgumentError, match=expected):
            model.evaluate(tuple(arrays[:2]), arrays[2], verbose=0)
