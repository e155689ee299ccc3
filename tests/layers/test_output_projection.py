"""Tests for kerasseq.layers.output_projection: the logits, and a tie that
survives `.keras` saving, `keras.models.clone_model` and `from_config`."""

import os

import keras
import numpy as np
import pytest

from kerasseq.layers import OutputProjection, PositionalEmbedding

X = np.random.default_rng(0).normal(size=(2, 3, 6)).astype("float32")
IDS = np.array([[4, 7, 1, 0], [9, 2, 0, 0]], "int32")


def test_untied_is_x_kernel_plus_bias():
    layer = OutputProjection(11)
    layer.build(X.shape)
    kernel = np.random.default_rng(1).normal(size=(6, 11)).astype("float32")
    bias = np.linspace(-1, 1, 11).astype("float32")
    layer.set_weights([kernel, bias])
    np.testing.assert_allclose(layer(X), X @ kernel + bias, atol=1e-5)
    clone = OutputProjection.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config() and "embedding" not in layer.get_config()


def test_tied_is_x_embedding_transposed_plus_bias_and_owns_only_the_bias():
    embedding = keras.layers.Embedding(11, 6)
    embedding.build((None,))
    layer = OutputProjection(11, embedding=embedding)
    layer.build(X.shape)
    assert [w.name for w in layer.trainable_variables if w is not embedding.embeddings] == ["bias"]
    layer.bias.assign(np.linspace(-1, 1, 11))
    matrix = keras.ops.convert_to_numpy(embedding.embeddings)
    np.testing.assert_allclose(layer(X), X @ matrix.T + np.linspace(-1, 1, 11), atol=1e-5)
    with pytest.raises(TypeError, match="embedding must be a keras.layers.Embedding"):
        OutputProjection(11, embedding=keras.layers.Dense(6))


def _tied_model(kind):
    """A hand-wired tied model: the tied embedding is a graph layer ("graph"),
    or the `token_embedding` inside a `PositionalEmbedding` ("nested")."""
    keras.utils.set_random_seed(0)
    ids = keras.Input((None,), dtype="int32")
    if kind == "graph":
        embedding = keras.layers.Embedding(20, 8, name="shared_embedding")
        tied, x = embedding, embedding(ids)
    else:
        embedding = PositionalEmbedding(20, 8, 16, name="target_embedding")
        tied, x = embedding.token_embedding, embedding(ids)
    x = keras.layers.Dense(8, activation="tanh", name="hidden")(x)
    logits = OutputProjection(20, embedding=tied, name="output_projection")(x)
    model = keras.Model(ids, logits)
    model.get_layer("output_projection").bias.assign(np.linspace(-1, 1, 20))
    return model


def _tied_embedding(model, kind):
    layer = model.get_layer("shared_embedding" if kind == "graph" else "target_embedding")
    return layer if kind == "graph" else layer.token_embedding


def _check_tied(model, kind):
    embedding = _tied_embedding(model, kind)
    projection = model.get_layer("output_projection")
    assert projection.embedding is embedding
    assert projection.kernel is None
    # one matrix: changing the embedding changes the logits through E^T
    before = model.predict(IDS, verbose=0)
    embedding.embeddings.assign(embedding.embeddings * 2.0)
    assert not np.allclose(model.predict(IDS, verbose=0), before)
    embedding.embeddings.assign(embedding.embeddings / 2.0)


@pytest.mark.parametrize("kind", ["graph", "nested"])
def test_a_tied_hand_wired_model_saves_and_loads_tied(kind, tmp_path):
    model = _tied_model(kind)
    expected = model.predict(IDS, verbose=0)
    path = os.path.join(tmp_path, "tied.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.count_params() == model.count_params()
    np.testing.assert_allclose(loaded.predict(IDS, verbose=0), expected, atol=1e-6)
    _check_tied(loaded, kind)


@pytest.mark.parametrize("kind", ["graph", "nested"])
def test_clone_model_ties_the_clone_to_the_clones_embedding(kind):
    model = _tied_model(kind)
    clone = keras.models.clone_model(model)
    assert clone.count_params() == model.count_params()
    assert clone.get_layer("output_projection").embedding is not _tied_embedding(model, kind)
    _check_tied(clone, kind)
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(clone.predict(IDS, verbose=0), model.predict(IDS, verbose=0),
                               atol=1e-6)


def test_the_config_names_the_embedding_by_its_place_in_the_graph():
    assert _tied_model("graph").get_layer("output_projection").get_config()["embedding"] == (
        "shared_embedding")
    assert _tied_model("nested").get_layer("output_projection").get_config()["embedding"] == (
        "target_embedding/token_embedding")
    rebuilt = keras.Model.from_config(_tied_model("nested").get_config())
    _check_tied(rebuilt, "nested")


def test_a_tie_that_no_config_can_name_is_refused_with_a_clear_error():
    embedding = keras.layers.Embedding(20, 8, name="lonely")
    embedding.build((None,))
    layer = OutputProjection(20, embedding=embedding)
    layer(np.zeros((1, 2, 8), "float32"))  # eager: no graph
    with pytest.raises(ValueError, match="tied to the embedding 'lonely'.*would load untied"):
        layer.get_config()
    # a config's path, called on values instead of a graph
    by_path = OutputProjection(20, embedding="shared_embedding")
    with pytest.raises(ValueError, match="finds it when called on a symbolic tensor"):
        by_path(np.zeros((1, 2, 8), "float32"))
    # ... or in a graph without that layer
    ids = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(20, 8, name="other")(ids)
    with pytest.raises(ValueError, match="no layer named 'shared_embedding' leads to its input"):
        OutputProjection(20, embedding="shared_embedding")(x)
