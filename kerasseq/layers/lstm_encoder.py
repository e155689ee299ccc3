"""The recurrent encoder: embedding → (bidirectional) LSTM stack."""

import contextlib
import threading

import keras
from keras import ops

from kerasseq._validation import check_positive_int, check_rate
from kerasseq.layers._sharing import (
    deserialize_shared_layer,
    outside_object_sharing,
    serialize_shared_layer,
)

# Held while an encoder's LSTMs have their cuDNN setting changed for one call.
_CUDNN_SETTING_LOCK = threading.RLock()


@keras.saving.register_keras_serializable(package="kerasseq")
class LSTMEncoder(keras.layers.Layer):
    """Embeds source tokens and reads them with one or more LSTM layers.

    Each LSTM layer updates, for every source position t (Hochreiter &
    Schmidhuber 1997; Sutskever et al. 2014):

        i_t = σ(W_i x_t + U_i h_{t-1} + b_i)      (input gate)
        f_t = σ(W_f x_t + U_f h_{t-1} + b_f)      (forget gate)
        o_t = σ(W_o x_t + U_o h_{t-1} + b_o)      (output gate)
        g_t = tanh(W_g x_t + U_g h_{t-1} + b_g)   (candidate)
        c_t = f_t ⊙ c_{t-1} + i_t ⊙ g_t
        h_t = o_t ⊙ tanh(c_t)

    Padding (id 0) is masked: padded positions neither change the state nor
    produce output (their outputs are zeros), so a batch padded to any length
    gives the same result for each real sequence. With `bidirectional=True` a
    second LSTM reads the sequence right to left and the two outputs are
    concatenated (Schuster & Paliwal 1997; Bahdanau et al. 2014).

    Args:
        vocab_size: int, number of source token ids (including reserved ids).
        embedding_dim: int, size of the token embedding vectors.
        units: int, LSTM state size per direction.
        bidirectional: bool, also read the sequence backwards.
        num_layers: int, number of stacked LSTM layers.
        dropout: float in [0, 1), dropout on each LSTM layer's inputs.
        embedding: optional `keras.layers.Embedding` to use instead of a new
            one, e.g. to share one embedding matrix between encoder and decoder.
        use_cudnn: `False` (default), `True` or `"auto"`, passed to each
            `keras.layers.LSTM`. With `False` the LSTMs run Keras' own loop
            everywhere, which XLA compiles: on a GPU the model then trains with
            `jit_compile="auto"` = XLA like every other kerasseq model. With
            `"auto"`/`True` training on a GPU uses cuDNN's fused LSTM kernel,
            which XLA cannot compile, so Keras trains such a model without XLA
            (it warns if `jit_compile=True` was asked for). Decoding, exports and
            attention plots never use cuDNN (see `call`'s `use_cudnn`).
        **kwargs: standard `keras.layers.Layer` arguments (`name`, `dtype`...);
            the dtype policy is passed on to the embedding and the LSTMs.

    Call arguments:
        source_ids: int tensor `(batch_size, source_length)`, 0 = padding.
        training: bool, enables dropout.
        use_cudnn: `None` (the layer's setting) or `False`: run Keras' own LSTM
            loop for this call even where the layer allows cuDNN. The models'
            inference entry points (`RNNSeq2Seq.encode`, `teacher_forced_attention`)
            pass `False`: their functions are compiled with XLA on a GPU, and an
            exported graph must run on a machine without cuDNN.

    Returns:
        A tuple `(outputs, final_state)`:
        `outputs` `(batch_size, source_length, units * num_directions)` are the
        top layer's per-position states h_i (zeros at padding);
        `final_state` `(batch_size, 2 * units * num_directions)` is the top
        layer's last `[h; c]` (forward then backward direction).

    Example:

    >>> encoder = LSTMEncoder(vocab_size=30, embedding_dim=8, units=16)
    >>> outputs, final_state = encoder(np.array([[5, 6, 7, 0]]))
    >>> outputs.shape, final_state.shape
    (TensorShape([1, 4, 16]), TensorShape([1, 32]))
    """

    def __init__(self, vocab_size, embedding_dim, units, bidirectional=False, num_layers=1,
                 dropout=0.0, embedding=None, use_cudnn=False, **kwargs):
        super().__init__(**kwargs)
        if use_cudnn not in (True, False, "auto"):
            raise ValueError("use_cudnn must be True, False or 'auto'. "
                             f"Received: use_cudnn={use_cudnn!r}")
        self.use_cudnn = use_cudnn
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.embedding_dim = check_positive_int("embedding_dim", embedding_dim)
        self.units = check_positive_int("units", units)
        self.num_layers = check_positive_int("num_layers", num_layers)
        self.dropout = check_rate("dropout", dropout)
        self.bidirectional = bool(bidirectional)
        # An embedding passed in (shared with another layer) is written into
        # the config, so a `.keras` file loads it shared again.
        self.shares_embedding = embedding is not None
        embedding = deserialize_shared_layer(embedding)
        self.embedding = embedding or keras.layers.Embedding(vocab_size, embedding_dim,
                                                             dtype=self.dtype_policy, name="embedding")
        self.lstm_layers = [self._make_lstm(i) for i in range(self.num_layers)]
        # `Bidirectional` rebuilds its two LSTMs from `LSTM.get_config()`, which
        # leaves `use_cudnn` out: they start as "auto" and, where a GPU is seen,
        # veto XLA (`supports_jit=False`). Say the setting again.
        for lstm in self._keras_lstms():
            lstm.use_cudnn = self.use_cudnn
            if self.use_cudnn is False:
                lstm.supports_jit = True
        self.supports_masking = True

    def _make_lstm(self, index):
        lstm = keras.layers.LSTM(self.units, return_sequences=True, return_state=True,
                                 dropout=self.dropout, use_cudnn=self.use_cudnn,
                                 dtype=self.dtype_policy, name=f"lstm_{index}")
        if self.bidirectional:
            # `Bidirectional` copies `lstm` into its two directions through
            # serialize/deserialize; inside `load_model`'s object-sharing scope
            # the throwaway `lstm` would be recorded by id and a later one at
            # the same address would load as this one's copy (see
            # `outside_object_sharing`).
            with outside_object_sharing():
                return keras.layers.Bidirectional(lstm, dtype=self.dtype_policy,
                                                  name=f"bidirectional_{index}")
        return lstm

    @property
    def output_dim(self):
        """Size of each per-position output vector."""
        return self.units * (2 if self.bidirectional else 1)

    def build(self, source_ids_shape):
        if not self.embedding.built:
            self.embedding.build(source_ids_shape)
        shape = tuple(source_ids_shape) + (self.embedding.output_dim,)
        for lstm in self.lstm_layers:
            lstm.build(shape)
            shape = shape[:-1] + (self.output_dim,)

    def _keras_lstms(self):
        """The `keras.layers.LSTM`s that run (both directions of a `Bidirectional`)."""
        for layer in self.lstm_layers:
            if isinstance(layer, keras.layers.Bidirectional):
                yield layer.forward_layer
                yield layer.backward_layer
            else:
                yield layer

    @contextlib.contextmanager
    def _cudnn_setting(self, use_cudnn):
        """Keras' LSTM reads its `use_cudnn` when it is traced: set it for one
        call (under a lock, so two threads tracing at once cannot restore each
        other's setting mid-trace)."""
        if use_cudnn is None or use_cudnn == self.use_cudnn:
            yield
            return
        if use_cudnn is not False:
            raise ValueError("A call can only turn cuDNN off: use_cudnn must be None or "
                             f"False. Received: use_cudnn={use_cudnn!r}")
        with _CUDNN_SETTING_LOCK:
            lstms = list(self._keras_lstms())
            saved = [lstm.use_cudnn for lstm in lstms]
            try:
                for lstm in lstms:
                    lstm.use_cudnn = False
                yield
            finally:
                for lstm, value in zip(lstms, saved, strict=True):
                    lstm.use_cudnn = value

    def call(self, source_ids, training=None, use_cudnn=None):
        mask = ops.not_equal(source_ids, 0)  # (batch_size, source_length)
        outputs = self.embedding(source_ids)
        with self._cudnn_setting(use_cudnn):
            for lstm in self.lstm_layers:
                outputs, *states = lstm(outputs, mask=mask, training=training)
        # states: [h, c] or [h_forward, c_forward, h_backward, c_backward]
        final_state = ops.concatenate(states, axis=-1)
        # Keras repeats the last real output over padding; make padding zeros.
        outputs = outputs * ops.cast(mask, outputs.dtype)[:, :, None]
        return outputs, final_state

    def compute_mask(self, source_ids, mask=None):
        return [ops.not_equal(source_ids, 0), None]

    def compute_output_shape(self, source_ids_shape):
        batch_size, source_length = source_ids_shape[:2]
        return (batch_size, source_length, self.output_dim), (batch_size, 2 * self.output_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size, embedding_dim=self.embedding_dim, units=self.units,
            bidirectional=self.bidirectional, num_layers=self.num_layers, dropout=self.dropout,
            use_cudnn=self.use_cudnn,
            embedding=serialize_shared_layer(self.embedding) if self.shares_embedding else None,
        )
        return config
