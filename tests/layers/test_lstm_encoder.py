import keras
import numpy as np
import pytest

from kerasseq.layers import GRUDecoder, LSTMEncoder
from tests.helpers import check_layer


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_lstm(xs, kernel, recurrent_kernel, bias, h, c):
    """Reference LSTM (Keras gate order i, f, g, o) over xs `(time, input_dim)`."""
    units = h.shape[-1]
    outputs = []
    for x in xs:
        z = x @ kernel + h @ recurrent_kernel + bias
        i, f = sigmoid(z[:units]), sigmoid(z[units:2 * units])
        g, o = np.tanh(z[2 * units:3 * units]), sigmoid(z[3 * units:])
        c = f * c + i * g
        h = o * np.tanh(c)
        outputs.append(h)
    return np.array(outputs), h, c


def test_gate_arithmetic_matches_seed_worked_example():
    # Seed 002: x = 2.0, h_{t-1} = 0, s_{t-1} = c_{t-1} = 1.0,
    # W_i = 0.5, U_f = 1, U_o = 1, W_g = 0.5, everything else 0.
    encoder = LSTMEncoder(vocab_size=5, embedding_dim=1, units=1)
    encoder(np.array([[4]]))
    lstm = encoder.lstm_layers[0]
    embedding = np.zeros((5, 1), "float32")
    embedding[4] = 2.0
    encoder.embedding.set_weights([embedding])
    kernel = np.array([[0.5, 0.0, 0.5, 0.0]], "float32")  # W_i, W_f, W_g, W_o
    recurrent = np.array([[0.0, 1.0, 0.0, 1.0]], "float32")  # U_i, U_f, U_g, U_o
    lstm.set_weights([kernel, recurrent, np.zeros(4, "float32")])
    x = encoder.embedding(np.array([[4]]))
    output, h, c = lstm(x, initial_state=[np.zeros((1, 1)), np.ones((1, 1))])
    assert sigmoid(1.0) == pytest.approx(0.731, abs=1e-3)  # i
    assert np.tanh(1.0) == pytest.approx(0.7616, abs=1e-4)  # g
    assert float(c[0, 0]) == pytest.approx(0.5 * 1.0 + sigmoid(1.0) * np.tanh(1.0), abs=1e-6)
    assert float(c[0, 0]) == pytest.approx(1.056, abs=1e-3)
    assert float(h[0, 0]) == pytest.approx(0.392, abs=1e-3)
    assert float(output[0, 0, 0]) == pytest.approx(float(h[0, 0]))


def test_matches_numpy_lstm_with_random_weights():
    rng = np.random.default_rng(0)
    encoder = LSTMEncoder(vocab_size=12, embedding_dim=3, units=4)
    ids = np.array([[5, 7, 2, 9]])
    outputs, final = encoder(ids)
    embedding = encoder.embedding.get_weights()[0]
    kernel, recurrent, bias = [w + rng.normal(0, 0.1, w.shape).astype("float32")
                               for w in encoder.lstm_layers[0].get_weights()]
    encoder.lstm_layers[0].set_weights([kernel, recurrent, bias])
    outputs, final = encoder(ids)
    ref_out, h, c = numpy_lstm(embedding[ids[0]], kernel, recurrent, bias, np.zeros(4), np.zeros(4))
    np.testing.assert_allclose(np.asarray(outputs)[0], ref_out, atol=1e-5)
    np.testing.assert_allclose(np.asarray(final)[0], np.concatenate([h, c]), atol=1e-5)


def test_bidirectional_backward_direction_reads_only_real_tokens():
    encoder = LSTMEncoder(vocab_size=12, embedding_dim=3, units=4, bidirectional=True)
    ids = np.array([[5, 7, 2, 0, 0]])
    outputs, final = encoder(ids)
    assert outputs.shape == (1, 5, 8) and final.shape == (1, 16)
    embedding = encoder.embedding.get_weights()[0]
    forward_weights = encoder.lstm_layers[0].forward_layer.get_weights()
    backward_weights = encoder.lstm_layers[0].backward_layer.get_weights()
    xs = embedding[[5, 7, 2]]
    fw_out, fw_h, fw_c = numpy_lstm(xs, *forward_weights, np.zeros(4), np.zeros(4))
    bw_out, bw_h, bw_c = numpy_lstm(xs[::-1], *backward_weights, np.zeros(4), np.zeros(4))
    outputs = np.asarray(outputs)[0]
    np.testing.assert_allclose(outputs[:3, :4], fw_out, atol=1e-5)
    np.testing.assert_allclose(outputs[:3, 4:], bw_out[::-1], atol=1e-5)
    np.testing.assert_allclose(outputs[3:], 0.0)
    np.testing.assert_allclose(np.asarray(final)[0], np.concatenate([fw_h, fw_c, bw_h, bw_c]), atol=1e-5)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_extra_padding_changes_no_real_output(bidirectional):
    encoder = LSTMEncoder(vocab_size=12, embedding_dim=3, units=4, bidirectional=bidirectional,
                          num_layers=2)
    short = np.array([[5, 7, 2], [3, 0, 0]])
    long = np.pad(short, ((0, 0), (0, 4)))
    out_short, final_short = encoder(short)
    out_long, final_long = encoder(long)
    np.testing.assert_allclose(np.asarray(out_long)[:, :3], np.asarray(out_short), atol=1e-6)
    np.testing.assert_allclose(np.asarray(final_long), np.asarray(final_short), atol=1e-6)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_outputs_are_zero_at_padding(bidirectional):
    encoder = LSTMEncoder(vocab_size=12, embedding_dim=3, units=4, bidirectional=bidirectional)
    outputs, _ = encoder(np.array([[5, 7, 2, 0, 0]]))
    outputs = np.asarray(outputs)[0]
    assert np.all(outputs[3:] == 0) and np.all(np.abs(outputs[:3]).sum(-1) > 0)


def test_empty_source_gives_zero_state_not_nan():
    encoder = LSTMEncoder(vocab_size=12, embedding_dim=3, units=4)
    outputs, final = encoder(np.zeros((2, 3), "int32"))
    assert np.all(np.asarray(outputs) == 0) and np.all(np.asarray(final) == 0)


def test_shared_embedding_is_used():
    import keras

    shared = keras.layers.Embedding(12, 3)
    encoder = LSTMEncoder(vocab_size=12, embedding_dim=3, units=4, embedding=shared)
    encoder(np.array([[1, 2]]))
    assert encoder.embedding is shared


def test_layer_contract():
    check_layer(LSTMEncoder, dict(vocab_size=12, embedding_dim=3, units=4, bidirectional=True,
                                  num_layers=2, dropout=0.1),
                np.array([[5, 7, 2, 0], [3, 1, 0, 0]], "int32"))


@pytest.mark.parametrize("kwargs, name", [
    (dict(vocab_size=0, embedding_dim=3, units=4), "vocab_size"),
    (dict(vocab_size=5, embedding_dim=3, units=-1), "units"),
    (dict(vocab_size=5, embedding_dim=3, units=4, num_layers=0), "num_layers"),
    (dict(vocab_size=5, embedding_dim=3, units=4, dropout=1.5), "dropout"),
])
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        LSTMEncoder(**kwargs)


def test_mixed_float16_layer_policy_matches_float32():
    # A per-layer policy (the global one stays float32) reaches the embedding and
    # both directions of every LSTM: outputs close to the float32 encoder's.
    ids = np.array([[5, 7, 2, 0], [3, 1, 0, 0], [0, 0, 0, 0]], "int32")
    kwargs = dict(vocab_size=12, embedding_dim=3, units=4, bidirectional=True, num_layers=2)
    reference = LSTMEncoder(**kwargs)
    expected = [np.asarray(x) for x in reference(ids)]
    encoder = LSTMEncoder(**kwargs, dtype="mixed_float16")
    encoder(ids)
    encoder.set_weights(reference.get_weights())
    outputs = encoder(ids)
    assert encoder.lstm_layers[0].backward_layer.compute_dtype == "float16"
    for output, reference_output in zip(outputs, expected, strict=True):
        assert output.dtype == "float16" and np.all(np.isfinite(np.asarray(output)))
        np.testing.assert_allclose(np.asarray(output, "float32"), reference_output, atol=1e-2)
    assert np.all(np.asarray(outputs[0])[0, 3:] == 0)  # padding stays zero


def test_embedding_shared_with_a_decoder_survives_keras_save_and_load(tmp_path):
    # The documented `embedding=` argument: one matrix for encoder and decoder.
    keras.utils.set_random_seed(0)
    shared = keras.layers.Embedding(12, 4, name="shared_embedding")
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    encoder = LSTMEncoder(vocab_size=12, embedding_dim=4, units=5, embedding=shared)
    decoder = GRUDecoder(vocab_size=12, embedding_dim=4, units=5, attention="bahdanau",
                         embedding=shared)
    outputs, state = encoder(source)
    logits = decoder(target, keras.layers.Dense(5)(state), outputs)
    model = keras.Model([source, target], logits)
    assert sum("embeddings" in w.path for w in model.weights) == 1
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    inputs = [np.array([[3, 5, 7, 0]]), np.array([[2, 4, 6]])]
    model.fit(inputs, np.array([[4, 6, 3]]), epochs=1, verbose=0)  # weights not at init

    path = tmp_path / "shared.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded(inputs), model(inputs), atol=1e-6)
    encoder_layer = next(x for x in loaded.layers if isinstance(x, LSTMEncoder))
    decoder_layer = next(x for x in loaded.layers if isinstance(x, GRUDecoder))
    assert encoder_layer.embedding is decoder_layer.embedding  # still one matrix
    assert sum("embeddings" in w.path for w in loaded.weights) == 1
    # A layer with its own embedding keeps `embedding=None` in its config.
    assert LSTMEncoder(vocab_size=12, embedding_dim=4, units=5).get_config()["embedding"] is None


def test_bidirectional_encoder_loads_whatever_address_its_lstms_get(tmp_path, monkeypatch):
    # The load-by-chance test. `keras.models.load_model` opens Keras'
    # object-sharing scope, which records every object it serializes under
    # `id(obj)`; an encoder that copied a throwaway LSTM through
    # serialize/deserialize (as `keras.layers.Bidirectional(lstm)` does) loaded,
    # by chance (11 in 300 constructions), an earlier encoder's LSTM: "Forward
    # layer and backward layer should have different go_backwards value". Here
    # every LSTM gets one id, as if each reused the last one's address: an
    # encoder that copies LSTMs fails every time. keras.src: nothing public
    # computes the scope's ids.
    from keras.src.saving import serialization_lib

    source = keras.Input((None,), dtype="int32")
    outputs, state = LSTMEncoder(vocab_size=10, embedding_dim=4, units=3, bidirectional=True,
                                 num_layers=2)(source)
    model = keras.Model(source, [outputs, state])
    path = tmp_path / "encoder.keras"
    model.save(path)
    monkeypatch.setattr(serialization_lib, "id",
                        lambda obj: 1 if isinstance(obj, keras.layers.LSTM) else id(obj),
                        raising=False)
    loaded = keras.models.load_model(path)
    monkeypatch.undo()
    ids = np.array([[5, 7, 2, 0], [3, 1, 0, 0]])
    for a, b in zip(loaded(ids), model(ids), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    encoder = next(x for x in loaded.layers if isinstance(x, LSTMEncoder))
    lstms = [lstm for pair in encoder.lstms() for lstm in pair]
    assert len({id(lstm) for lstm in lstms}) == 4  # no LSTM came back twice
    assert [lstm.go_backwards for lstm in lstms] == [False, True, False, True]
    assert [w.path for w in loaded.weights] == [w.path for w in model.weights]
    # The encoder serializes no LSTM of its own: nothing recorded in an open scope.
    from keras.src.backend.common import global_state

    with serialization_lib.ObjectSharingScope():
        LSTMEncoder(vocab_size=10, embedding_dim=4, units=3, bidirectional=True)
        assert global_state.get_global_attribute("shared_objects/id_to_config_map") == {}
        assert global_state.get_global_attribute("shared_objects/id_to_obj_map") == {}


def test_two_lstms_per_bidirectional_layer_saved_under_keras_bidirectional_paths(tmp_path):
    # The weights keep the file layout of `keras.layers.Bidirectional`, which
    # the encoder used before (tests/fixtures/legacy/rnn.keras): a wrapper's
    # two LSTMs load into the encoder's explicit forward and backward LSTMs.
    import zipfile

    import h5py

    ids = np.array([[5, 7, 2, 0], [3, 1, 0, 0]])
    keras.utils.set_random_seed(4)
    wrapped = keras.Sequential([
        keras.Input((None,), dtype="int32"),
        keras.layers.Embedding(10, 4, mask_zero=True),
        keras.layers.Bidirectional(keras.layers.LSTM(3, return_sequences=True)),
    ])
    encoder = LSTMEncoder(vocab_size=10, embedding_dim=4, units=3, bidirectional=True)
    encoder(ids)
    encoder.set_weights(wrapped.get_weights())
    np.testing.assert_allclose(np.asarray(encoder(ids)[0]), np.asarray(wrapped(ids)), atol=1e-6)
    source = keras.Input((None,), dtype="int32")
    model = keras.Model(source, encoder(source)[0])
    model.save(tmp_path / "encoder.keras")
    with zipfile.ZipFile(tmp_path / "encoder.keras") as archive:
        archive.extract("model.weights.h5", tmp_path)
    groups = []
    with h5py.File(tmp_path / "model.weights.h5") as weights:
        weights.visit(lambda name: groups.append(name) if name.endswith("/cell/vars") else None)
    assert groups == [f"layers/lstm_encoder/lstm_layers/bidirectional/{direction}_layer/cell/vars"
                      for direction in ("backward", "forward")]


def test_shared_embedding_survives_from_config():
    # `get_config()` holds the shared layer itself, so a layer rebuilt from
    # its config (outside a `.keras` load) still shares it.
    shared = keras.layers.Embedding(12, 4)
    encoder = LSTMEncoder(vocab_size=12, embedding_dim=4, units=5, embedding=shared)
    decoder = GRUDecoder(vocab_size=12, embedding_dim=4, units=5, embedding=shared)
    assert encoder.get_config()["embedding"] is shared
    assert LSTMEncoder.from_config(encoder.get_config()).embedding is shared
    assert GRUDecoder.from_config(decoder.get_config()).embedding is shared
