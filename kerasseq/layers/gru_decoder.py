"""The recurrent decoder: one GRU step, scanned over the target for training."""

import keras
import tensorflow as tf
from keras import ops

from kerasseq._validation import check_positive_int, check_rate
from kerasseq.layers.bahdanau_attention import BahdanauAttention
from kerasseq.layers.luong_attention import LuongAttention

ATTENTION_NAMES = ("bahdanau", "luong", "luong_dot", "luong_general", "luong_concat")


def make_attention(attention, units, dtype=None):
    """Turn `attention=` (None, a name, a config dict or a layer) into a layer.

    An attention given by name gets the dtype policy `dtype`; a layer or a
    config dict keeps its own.
    """
    if attention is None or isinstance(attention, keras.layers.Layer):
        return attention
    if isinstance(attention, dict):
        return keras.saving.deserialize_keras_object(attention)
    if attention == "bahdanau":
        return BahdanauAttention(units, dtype=dtype, name="attention")
    if attention in ("luong", "luong_general"):
        return LuongAttention("general", dtype=dtype, name="attention")
    if attention == "luong_dot":
        return LuongAttention("dot", dtype=dtype, name="attention")
    if attention == "luong_concat":
        return LuongAttention("concat", units=units, dtype=dtype, name="attention")
    raise ValueError(f"attention must be None, a layer, or one of {list(ATTENTION_NAMES)}. "
                     f"Received: attention={attention!r}")


@keras.saving.register_keras_serializable(package="kerasseq")
class GRUDecoder(keras.layers.Layer):
    """A GRU decoder that predicts one target token per step.

    One step, given the previous token y_{t-1} and state s_{t-1} (symbols as
    in docs/notation.md):

        ctx_t = Attention(s_{t-1}, h_1..h_S)       (Bahdanau: before the update)
        s_t = GRU([E[y_{t-1}]; ctx_t], s_{t-1})
        ctx_t = Attention(s_t, h_1..h_S)           (Luong: after the update)
        logits_t = W_o [s_t; ctx_t] + b_o

    The GRU update is the one of Cho et al. (2014) with the reset gate applied
    after the recurrent matrix (as in cuDNN and PyTorch):

        u_t = σ(W_u x_t + U_u s_{t-1} + b_u)
        r_t = σ(W_r x_t + U_r s_{t-1} + b_r)
        s̃_t = tanh(W_h x_t + r_t ⊙ (U_h s_{t-1} + b'_h) + b_h)
        s_t = u_t ⊙ s_{t-1} + (1 - u_t) ⊙ s̃_t

    Without attention the decoder is the context-vector model: ctx_t is the
    same fixed vector for every step (the decoder's initial state, i.e. the
    bridged encoder summary, as in Cho et al. 2014); `feed_context=False` drops
    it and gives the Sutskever et al. (2014) decoder, which sees the source only
    through its initial state.

    Training call and single-step decoding use the same `step` function: the
    training call scans it over the target positions with `tf.scan`,
    and `step` is what a model's `decode_step` calls, so both give the same
    logits.

    Scheduled sampling (Bengio et al. 2015): in training, each input token
    after the first is replaced, with probability `sampling_probability`, by
    the decoder's own most likely prediction from the previous step. The
    probability is a non-trainable variable that
    `kerasseq.training.ScheduledSampling` anneals during `fit`; 0 is plain
    teacher forcing, and inference never samples.

    Args:
        vocab_size: int, number of target token ids (including reserved ids).
        embedding_dim: int, size of the target embeddings.
        units: int, GRU state size.
        attention: None, "bahdanau", "luong" (= "luong_general"), "luong_dot",
            "luong_concat", or an attention layer (a `RecurrentAttention`:
            `precompute_keys`, `score` and `query_uses_previous_state`).
        dropout: float in [0, 1), dropout on embeddings and on the features
            before the output projection.
        embedding: optional shared `keras.layers.Embedding` (as
            `LSTMEncoder`'s: `get_config()` holds that layer itself).
        sampling_probability: float in [0, 1], initial scheduled-sampling rate.
        feed_context: bool, without attention feed the fixed context to every
            step (Cho 2014) or not (Sutskever 2014).
        attention_units: int, hidden size of an attention given by name
            (default: `units`).
        seed: optional int, seed of the scheduled-sampling draws; `None`
            (default) follows Keras' global seeding
            (`keras.utils.set_random_seed`).
        **kwargs: standard `keras.layers.Layer` arguments (`name`, `dtype`...).
            The dtype policy is passed on to the embedding, the GRU cell and
            an attention given by name; the output projection computes in the
            policy's variable dtype, so under `mixed_float16` the logits are
            float32.

    Call arguments:
        target_in_ids: int `(batch_size, target_length)`: `[START] y_1 ... y_{T-1}`
            (teacher forcing), 0 = padding.
        initial_state: `(batch_size, units)`: s_0, e.g. from `Bridge`.
        values: `(batch_size, source_length, value_dim)`: encoder outputs h_i
            (needed with attention).
        encoder_padding_mask: bool `(batch_size, source_length)`, True = real
            token. Without it, the Keras mask carried by `values` is used (the
            outputs of `LSTMEncoder` and of `Embedding(mask_zero=True)` carry
            one); with neither, every source position is attended.
        training: bool.
        return_attention_scores: bool, also return the attention weights.
        values_mask: the slot Keras fills with the mask carried by `values`.

    Returns:
        logits `(batch_size, target_length, vocab_size)` (float32 under
        `mixed_float16`), and with
        `return_attention_scores=True` also the attention weights
        `(batch_size, target_length, source_length)`.

    Example:

    >>> import numpy as np
    >>> decoder = GRUDecoder(vocab_size=20, embedding_dim=8, units=16, attention="bahdanau")
    >>> logits = decoder(np.array([[2, 5, 6]]), np.zeros((1, 16)), np.ones((1, 4, 12)))
    >>> tuple(logits.shape)
    (1, 3, 20)
    """

    def __init__(self, vocab_size, embedding_dim, units, attention=None, dropout=0.0,
                 embedding=None, sampling_probability=0.0, feed_context=True,
                 attention_units=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.embedding_dim = check_positive_int("embedding_dim", embedding_dim)
        self.units = check_positive_int("units", units)
        self.dropout = check_rate("dropout", dropout)
        if not 0.0 <= float(sampling_probability) <= 1.0:
            raise ValueError("sampling_probability must be in [0, 1]. "
                             f"Received: sampling_probability={sampling_probability!r}")
        self.initial_sampling_probability = float(sampling_probability)
        self.feed_context = bool(feed_context)
        self.attention_units = (None if attention_units is None
                                else check_positive_int("attention_units", attention_units))
        dtype = self.dtype_policy
        self.attention = make_attention(attention, self.attention_units or units, dtype)
        self.context_source = self._context_source()
        self.shares_embedding = embedding is not None
        if isinstance(embedding, dict):  # the config of a shared layer, in a `.keras` load
            embedding = keras.saving.deserialize_keras_object(embedding)
        self.embedding = embedding or keras.layers.Embedding(vocab_size, embedding_dim,
                                                             dtype=dtype, name="embedding")
        self.cell = keras.layers.GRUCell(units, dtype=dtype, name="gru_cell")
        self.input_dropout = keras.layers.Dropout(self.dropout, dtype=dtype, name="input_dropout")
        self.output_dropout = keras.layers.Dropout(self.dropout, dtype=dtype, name="output_dropout")
        # The output projection computes in the variable dtype (float32 under
        # `mixed_float16`), as Keras recommends for a model's last layer: the
        # logits and the softmax over a large vocabulary stay in float32.
        self.output_dense = keras.layers.Dense(vocab_size, dtype=dtype.variable_dtype,
                                               name="output_dense")
        self.seed = seed
        # With seed=None the generator draws its seed from Keras' global
        # seeding; it is created in build(), after every sublayer has drawn
        # the seeds of its initializers, so that the initial weights under
        # `keras.utils.set_random_seed` are those of a fixed-seed generator.
        self.seed_generator = None if seed is None else keras.random.SeedGenerator(seed)

    def _context_source(self):
        """Where ctx_t comes from, one of four decoders (see `step`):

        "before": Attention(s_{t-1}, h), fed to the GRU and the output (Bahdanau);
        "after":  Attention(s_t, h), fed to the output only (Luong);
        "fixed":  the initial state s_0 at every step, fed to both (Cho 2014);
        None:     no ctx_t (Sutskever 2014: `feed_context=False`, no attention).
        """
        if self.attention is not None:
            return "before" if self.attention.query_uses_previous_state else "after"
        return "fixed" if self.feed_context else None

    def build(self, target_in_ids_shape, initial_state_shape=None, values_shape=None,
              encoder_padding_mask_shape=None, values_mask_shape=None):
        batch_size = target_in_ids_shape[0]
        if self.attention is not None:
            if values_shape is None:
                raise ValueError("GRUDecoder with attention needs `values` (the encoder outputs).")
            context_dim = values_shape[-1]
            if not self.attention.built:
                self.attention.build((batch_size, self.units), values_shape)
        else:
            context_dim = self.units if self.feed_context else 0
        if not self.embedding.built:
            self.embedding.build(target_in_ids_shape)
        step_input_dim = self.embedding.output_dim
        if self.context_source in ("before", "fixed"):
            step_input_dim += context_dim
        self.cell.build((batch_size, step_input_dim))
        self.output_dense.build((batch_size, self.units + context_dim))
        if self.seed_generator is None:
            self.seed_generator = keras.random.SeedGenerator(None)
        self.sampling_probability = self.add_weight(
            name="sampling_probability", shape=(), trainable=False,
            initializer=keras.initializers.Constant(self.initial_sampling_probability))

    # ----------------------------------------------------------------- memory
    def prepare_memory(self, initial_state, values=None, encoder_padding_mask=None):
        """What every step reads from the source, computed once per sentence.

        Args:
            initial_state: `(batch_size, units)`.
            values: encoder outputs `(batch_size, source_length, value_dim)`.
            encoder_padding_mask: bool `(batch_size, source_length)`, True =
                real token (default: every position).

        Returns a dict: with attention `values` `(batch_size, source_length,
        value_dim)`, `keys` (the attention's precomputed keys) and
        `source_mask` `(batch_size, source_length)` (the decoding state's key
        for the encoder padding mask); without attention but with
        `feed_context`, `context` `(batch_size, units)`; else empty.
        """
        if self.attention is not None:
            if values is None:
                raise ValueError("GRUDecoder with attention needs `values` (encoder outputs).")
            if encoder_padding_mask is None:
                encoder_padding_mask = ops.ones(ops.shape(values)[:2], dtype="bool")
            return {"values": values, "keys": self.attention.precompute_keys(values),
                    "source_mask": ops.cast(encoder_padding_mask, "bool")}
        return {"context": initial_state} if self.feed_context else {}

    # ------------------------------------------------------------------- step
    def _attend(self, query, memory):
        return self.attention(query, memory["values"], memory["source_mask"], keys=memory["keys"])

    def step(self, token_ids, state, memory, training=None):
        """One decoder step: y_{t-1}, s_{t-1} → logits_t, s_t.

            ctx_t    = Attention(s_{t-1}, h)          if context_source == "before"
            s_t      = GRU([E[y_{t-1}]; ctx_t], s_{t-1})   (ctx_t fed: "before", "fixed")
            ctx_t    = Attention(s_t, h)              if context_source == "after"
            logits_t = W_o [s_t; ctx_t] + b_o         (s_t alone when there is no ctx_t)

        Args:
            token_ids: int `(batch_size,)`: y_{t-1}.
            state: `(batch_size, units)`: s_{t-1}.
            memory: dict from `prepare_memory`.

        Returns:
            `(logits, new_state, attention_weights)`: `(batch_size, vocab_size)`
            (in the output projection's dtype, float32 under `mixed_float16`),
            `(batch_size, units)`, and `(batch_size, source_length)` or None.
        """
        x = self.input_dropout(self.embedding(token_ids), training=training)  # E[y_{t-1}]
        context, weights = memory.get("context"), None  # "fixed": s_0; else None until attended
        if self.context_source == "before":
            context, weights = self._attend(state, memory)
        if self.context_source in ("before", "fixed"):
            x = ops.concatenate([x, ops.cast(context, x.dtype)], axis=-1)  # [E[y_{t-1}]; ctx_t]
        new_state, _ = self.cell(x, state, training=training)  # s_t
        if self.context_source == "after":
            context, weights = self._attend(new_state, memory)
        features = new_state if context is None else ops.concatenate(
            [new_state, ops.cast(context, new_state.dtype)], axis=-1)  # [s_t; ctx_t]
        logits = self.output_dense(self.output_dropout(features, training=training))
        return logits, new_state, weights

    # ------------------------------------------------------------ whole target
    def _sampling_coins(self, target_in_ids, training):
        """bool `(target_length, batch_size)`: True = feed the model's own prediction."""
        shape = ops.shape(ops.transpose(target_in_ids))
        if not training:
            return ops.zeros(shape, dtype="bool")
        draws = keras.random.uniform(shape, seed=self.seed_generator)
        coins = ops.less(draws, ops.cast(self.sampling_probability, draws.dtype))
        first = ops.arange(shape[0])[:, None] > 0  # never replace the start token
        return ops.logical_and(coins, first)

    def call(self, target_in_ids, initial_state, values=None, encoder_padding_mask=None,
             training=None, return_attention_scores=False, values_mask=None):
        # Keras fills `values_mask` with the mask that travels on `values`
        # (LSTMEncoder's outputs carry one): padding is never attended.
        encoder_padding_mask = values_mask if encoder_padding_mask is None else encoder_padding_mask
        target_in_ids = ops.cast(target_in_ids, "int32")
        memory = self.prepare_memory(initial_state, values, encoder_padding_mask)
        batch_size = ops.shape(target_in_ids)[0]
        carry = {"state": initial_state,
                 "logits": ops.zeros((batch_size, self.vocab_size), self.output_dense.compute_dtype)}
        if self.attention is not None:
            carry["attention_weights"] = ops.zeros(ops.shape(values)[:2], self.compute_dtype)

        def scan_step(carry, inputs):
            token_ids, use_prediction = inputs
            predicted = ops.cast(ops.argmax(carry["logits"], axis=-1), "int32")
            token_ids = ops.where(use_prediction, predicted, token_ids)  # (batch_size,)
            logits, state, weights = self.step(token_ids, carry["state"], memory, training)
            new_carry = {"state": state, "logits": logits}
            if weights is not None:
                new_carry["attention_weights"] = ops.cast(weights, self.compute_dtype)
            return new_carry

        xs = (ops.transpose(target_in_ids), self._sampling_coins(target_in_ids, training))
        # tf.scan rather than keras.ops.scan: in Keras 3.15 the TensorFlow
        # version of ops.scan fails inside a graph when the number of steps is
        # unknown (padded batches of any length), which is the normal case here.
        outputs = tf.scan(scan_step, xs, initializer=carry)
        logits = ops.transpose(outputs["logits"], (1, 0, 2))  # (batch_size, target_length, vocab_size)
        if return_attention_scores:
            if self.attention is None:
                raise ValueError("return_attention_scores=True needs a decoder with attention.")
            weights = ops.transpose(outputs["attention_weights"], (1, 0, 2))
            return logits, weights  # weights: (batch_size, target_length, source_length)
        return logits

    def compute_output_shape(self, target_in_ids_shape, initial_state_shape=None,
                             values_shape=None, encoder_padding_mask_shape=None,
                             values_mask_shape=None):
        return tuple(target_in_ids_shape[:2]) + (self.vocab_size,)

    def compute_output_spec(self, target_in_ids, initial_state, values=None,
                            encoder_padding_mask=None, training=None,
                            return_attention_scores=False, values_mask=None):
        shape = tuple(target_in_ids.shape[:2])
        logits = keras.KerasTensor(shape + (self.vocab_size,), dtype=self.output_dense.compute_dtype)
        if return_attention_scores:
            return logits, keras.KerasTensor(shape + (values.shape[1],), dtype=self.compute_dtype)
        return logits

    def get_config(self):
        config = super().get_config()
        sampling = getattr(self, "sampling_probability", None)
        config.update(
            vocab_size=self.vocab_size, embedding_dim=self.embedding_dim, units=self.units,
            attention=(None if self.attention is None
                       else keras.saving.serialize_keras_object(self.attention)),
            dropout=self.dropout,
            embedding=self.embedding if self.shares_embedding else None,
            sampling_probability=(self.initial_sampling_probability if sampling is None
                                  else float(ops.convert_to_numpy(sampling))),
            feed_context=self.feed_context, attention_units=self.attention_units, seed=self.seed,
        )
        return config
