"""The recurrent encoder: embedding → (bidirectional) LSTM stack."""

import keras
from keras import ops

from kerasseq._validation import check_positive_int, check_rate


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

    With `bidirectional=True` a second LSTM reads the sequence right to left,
    and each position's output is the pair of both directions' states,
    h_i = [→h_i ; ←h_i] (Schuster & Paliwal 1997; Bahdanau et al. 2014).
    Padding (id 0) is masked: padded positions neither change the state nor
    produce output (their outputs are zeros), so a batch padded to any length
    gives the same result for each real sequence.

    Args:
        vocab_size: int, number of source token ids (including reserved ids).
        embedding_dim: int, size of the token embedding vectors.
        units: int, LSTM state size per direction.
        bidirectional: bool, also read the sequence backwards.
        num_layers: int, number of stacked LSTM layers.
        dropout: float in [0, 1), dropout on each LSTM layer's inputs.
        embedding: optional `keras.layers.Embedding` to use instead of a new
            one, e.g. to share one embedding matrix between encoder and
            decoder. `get_config()` then holds that layer itself: a `.keras`
            file of a model holding both users loads one shared matrix, and
            `from_config(get_config())` (and so `keras.models.clone_model`)
            uses the same layer again.
        use_cudnn: `False` (default), `True` or `"auto"`, passed to each
            `keras.layers.LSTM`. With `False` the LSTMs run Keras' own loop
            everywhere, which XLA compiles: on a GPU the model then trains with
            `jit_compile="auto"` = XLA like every other kerasseq model. With
            `"auto"`/`True` training on a GPU uses cuDNN's fused LSTM kernel,
            which XLA cannot compile, so Keras trains such a model without XLA
            (it warns if `jit_compile=True` was asked for). `RNNSeq2Seq`'s
            decoding entry points turn cuDNN off for their own calls
            (`kerasseq.models.rnn_seq2seq.lstms_without_cudnn`).
        **kwargs: standard `keras.layers.Layer` arguments (`name`, `dtype`...);
            the dtype policy is passed on to the embedding and the LSTMs.

    Call arguments:
        source_ids: int tensor `(batch_size, source_length)`, 0 = padding.
        training: bool, enables dropout.

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
        self.shares_embedding = embedding is not None
        if isinstance(embedding, dict):  # the config of a shared layer, in a `.keras` load
            embedding = keras.saving.deserialize_keras_object(embedding)
        self.embedding = embedding or keras.layers.Embedding(vocab_size, embedding_dim,
                                                             dtype=self.dtype_policy, name="embedding")
        self.lstm_layers = [self._bidirectional(i) if self.bidirectional
                            else self._lstm(f"lstm_{i}") for i in range(self.num_layers)]
        self.supports_masking = True

    def _bidirectional(self, index):
        # `keras.layers.Bidirectional(lstm)`, which this encoder used before,
        # built its two LSTMs as copies of a third; making that third one too
        # (and dropping it) draws Keras' default seeds as before, so the initial
        # weights under `keras.utils.set_random_seed` (and the documented
        # numbers of untrained models) are the same.
        self._lstm(f"lstm_{index}")
        return Bidirectional(self._lstm(f"forward_lstm_{index}"),
                             self._lstm(f"backward_lstm_{index}", go_backwards=True),
                             dtype=self.dtype_policy, name=f"bidirectional_{index}")

    def _lstm(self, name, go_backwards=False):
        return keras.layers.LSTM(self.units, return_sequences=True, return_state=True,
                                 go_backwards=go_backwards, dropout=self.dropout,
                                 use_cudnn=self.use_cudnn, dtype=self.dtype_policy, name=name)

    @property
    def output_dim(self):
        """Size of each per-position output vector."""
        return self.units * (2 if self.bidirectional else 1)

    def lstms(self):
        """`[(forward_lstm, backward_lstm or None), ...]`, bottom layer first."""
        return [(layer.forward_layer, layer.backward_layer) if self.bidirectional
                else (layer, None) for layer in self.lstm_layers]

    def build(self, source_ids_shape):
        if not self.embedding.built:
            self.embedding.build(source_ids_shape)
        shape = tuple(source_ids_shape) + (self.embedding.output_dim,)
        for forward_lstm, backward_lstm in self.lstms():
            for lstm in (forward_lstm, backward_lstm or forward_lstm):
                lstm.build(shape)
            shape = shape[:-1] + (self.output_dim,)
        for layer in self.lstm_layers:
            layer.built = True

    def call(self, source_ids, training=None):
        mask = ops.not_equal(source_ids, 0)  # (batch_size, source_length)
        h = self.embedding(source_ids)  # x_i = E[source_i]
        for forward_lstm, backward_lstm in self.lstms():
            h_forward, *state = forward_lstm(h, mask=mask, training=training)  # →h_i, [h; c]
            if backward_lstm is None:
                h = h_forward
                continue
            # ←h: the LSTM reads x_S … x_1 and returns its states in that order.
            h_backward, *backward_state = backward_lstm(h, mask=mask, training=training)
            h_backward = ops.flip(h_backward, axis=1)  # back to positions 1 … S
            h = ops.concatenate([h_forward, h_backward], axis=-1)  # h_i = [→h_i ; ←h_i]
            state += backward_state
        final_state = ops.concatenate(state, axis=-1)  # m = [h_S; c_S] (; [h_1; c_1] backward)
        # Keras repeats the last real output over padding; make padding zeros.
        outputs = h * ops.cast(mask, h.dtype)[:, :, None]
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
            use_cudnn=self.use_cudnn, embedding=self.embedding if self.shares_embedding else None,
        )
        return config


class Bidirectional(keras.layers.Layer):
    """The two LSTMs of one bidirectional encoder layer, as `forward_layer` and
    `backward_layer`: the names and the class name under which `.keras` files
    store their weights (`lstm_layers/bidirectional/forward_layer/...`, the
    layout of `keras.layers.Bidirectional`, which earlier encoders used).
    `LSTMEncoder.call` runs both directions itself; this layer has no call.
    """

    def __init__(self, forward_layer, backward_layer, **kwargs):
        super().__init__(**kwargs)
        self.forward_layer = forward_layer
        self.backward_layer = backward_layer
