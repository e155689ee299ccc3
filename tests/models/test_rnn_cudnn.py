"""The RNN on a GPU: cuDNN's fused LSTM kernel never reaches XLA or an export.

Keras' LSTM takes cuDNN's kernel (the `CudnnRNNV3` op) whenever it is traced
where TensorFlow sees a GPU. XLA cannot compile that op, and a graph holding it
runs only where cuDNN is. On an H200 every XLA search of an RNN failed with
"No registered 'CudnnRNNV3' OpKernel for XLA_GPU_JIT" and Keras turned XLA off
for RNN training. These tests make Keras believe a GPU is there (its one check,
`_is_gpu_available`), so a CPU run traces exactly what a GPU run traces: with
the bug the searches fail (no kernel for the op on this machine either).
"""

import importlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasseq import SearchConfig, Translator
from kerasseq.export import export_translator
from kerasseq.layers import LSTMEncoder
from kerasseq.models import build_rnn_seq2seq
from kerasseq.models.rnn_seq2seq import lstms_without_cudnn
from kerasseq.training import MaskedSparseCategoricalCrossentropy
from tests.models.g2p_fixture import trained_tiny_g2p_rnn

WORDS = ["cat", "dog", "tact", "good", "a", "goat"]


def keras_lstms(encoder):
    return [lstm for pair in encoder.lstms() for lstm in pair if lstm is not None]


def keras_sees_a_gpu(monkeypatch):
    # the module (the package's `rnn` attribute is the function of that name)
    keras_tf_rnn = importlib.import_module("keras.src.backend.tensorflow.rnn")
    monkeypatch.setattr(keras_tf_rnn, "_is_gpu_available", lambda: True)


def cudnn_ops(concrete_function):
    graph = concrete_function.graph.as_graph_def()
    ops = {node.op for node in graph.node}
    for function in graph.library.function:
        ops.update(node.op for node in function.node_def)
    return sorted(op for op in ops if "Cudnn" in op)


@pytest.fixture(scope="module")
def trained():
    """A tiny G2P RNN with cuDNN allowed (`use_cudnn="auto"`), its weights
    trained on CPU, and its translations on CPU as the reference."""
    model, _, _ = trained_tiny_g2p_rnn(seed=3, epochs=10, use_cudnn="auto")
    expected = Translator(model, SearchConfig(method="beam", num_beams=2)).translate(WORDS)
    return model, expected


@pytest.mark.parametrize("jit_compile", [True, False])
def test_searches_never_trace_cudnn(trained, monkeypatch, jit_compile):
    model, expected = trained
    keras_sees_a_gpu(monkeypatch)
    # a model built "on the GPU" (its layers decided for cuDNN when built)
    on_gpu = keras.models.clone_model(model)
    on_gpu.set_weights(model.get_weights())
    assert not all(layer.supports_jit for layer in keras_lstms(on_gpu.encoder))
    config = SearchConfig(method="beam", num_beams=2, jit_compile=jit_compile)
    assert Translator(on_gpu, config).translate(WORDS) == expected
    # the encoder keeps its own setting after the search
    assert [lstm.use_cudnn for lstm in keras_lstms(on_gpu.encoder)] == ["auto", "auto"]


def test_export_graph_holds_no_cudnn_op(trained, monkeypatch, tmp_path):
    model, expected = trained
    keras_sees_a_gpu(monkeypatch)
    export_translator(model, tmp_path / "export", num_beams=2)
    loaded = tf.saved_model.load(str(tmp_path / "export"))
    serve = loaded.signatures["serving_default"]
    assert cudnn_ops(serve) == []
    outputs = serve(text=tf.constant(WORDS))
    translations = [t.decode("utf-8") for t in outputs["translation"].numpy()]
    assert translations == expected


def test_teacher_forced_attention_never_traces_cudnn(trained, monkeypatch):
    model, _ = trained
    source = np.array([[5, 6, 7, 0], [4, 5, 0, 0]], "int32")
    target = np.array([[2, 5, 6], [2, 7, 0]], "int32")
    expected = np.asarray(model.teacher_forced_attention(source, target))
    keras_sees_a_gpu(monkeypatch)
    function = tf.function(model.teacher_forced_attention, jit_compile=True)
    np.testing.assert_allclose(np.asarray(function(source, target)), expected, atol=1e-6)


def test_default_model_trains_with_xla_on_a_gpu_and_cudnn_is_a_choice(monkeypatch):
    keras_sees_a_gpu(monkeypatch)
    real = tf.config.list_physical_devices
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda device_type=None: (
        real(device_type) + [tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")]
        if device_type in (None, "GPU") else real(device_type)))
    default = build_rnn_seq2seq(12, 11, embedding_dim=6, units=8)
    default.compile(optimizer="sgd", loss=MaskedSparseCategoricalCrossentropy())
    assert default.jit_compile is True  # no layer vetoes XLA
    with_cudnn = build_rnn_seq2seq(12, 11, embedding_dim=6, units=8, use_cudnn="auto")
    with_cudnn.compile(optimizer="sgd", loss=MaskedSparseCategoricalCrossentropy())
    assert with_cudnn.jit_compile is False  # Keras' choice: cuDNN instead of XLA
    assert keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(with_cudnn)).use_cudnn == "auto"


def test_bad_cudnn_settings_are_named():
    with pytest.raises(ValueError, match="use_cudnn must be True, False or 'auto'"):
        LSTMEncoder(vocab_size=10, embedding_dim=4, units=4, use_cudnn="yes")


def test_lstms_without_cudnn_restores_each_setting_even_after_an_error():
    encoder = LSTMEncoder(vocab_size=10, embedding_dim=4, units=4, bidirectional=True,
                          num_layers=2, use_cudnn="auto")
    with pytest.raises(RuntimeError, match="inside"):
        with lstms_without_cudnn(encoder):
            assert [lstm.use_cudnn for lstm in keras_lstms(encoder)] == [False] * 4
            raise RuntimeError("inside")
    assert [lstm.use_cudnn for lstm in keras_lstms(encoder)] == ["auto"] * 4
