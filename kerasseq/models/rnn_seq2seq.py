"""The recurrent encoder–decoder: LSTM encoder → bridge → GRU decoder (+ attention)."""

import contextlib
import threading

import keras
from keras import ops

from kerasseq.decoding.contract import ATTENTION_WEIGHTS, SOURCE_MASK
from kerasseq.layers import Bridge, GRUDecoder, LSTMEncoder
from kerasseq.models.base import Seq2SeqModel, build_seq2seq, check_shared_vocabulary

# Held while an encoder's LSTMs have cuDNN turned off for one call.
_CUDNN_SETTING_LOCK = threading.RLock()


@contextlib.contextmanager
def lstms_without_cudnn(encoder):
    """Run the `keras.layers.LSTM`s of `encoder` (an `LSTMEncoder`) with Keras'
    own loop, never cuDNN's fused kernel, for the calls traced in this block.

    Keras' LSTM reads its `use_cudnn` when it is traced; the setting is turned
    off for the block and restored after it, under a lock, so that two threads
    tracing at once cannot restore each other's setting mid-trace. The
    decoding entry points use it: their functions are compiled with XLA on a
    GPU, which cannot compile cuDNN's kernel, and an exported graph must run
    on a machine without cuDNN. An encoder built with `use_cudnn=False` (the
    default) is left alone.
    """
    if encoder.use_cudnn is False:
        yield
        return
    lstms = [lstm for pair in encoder.lstms() for lstm in pair if lstm is not None]
    with _CUDNN_SETTING_LOCK:
        saved = [lstm.use_cudnn for lstm in lstms]
        try:
            for lstm in lstms:
                lstm.use_cudnn = False
            yield
        finally:
            for lstm, value in zip(lstms, saved, strict=True):
                lstm.use_cudnn = value


@keras.saving.register_keras_serializable(package="kerasseq")
class RNNSeq2Seq(Seq2SeqModel):
    """LSTM encoder, `Bridge`, GRU decoder with optional attention.

    * `attention=None`: the context-vector model of Sutskever et al. (2014)
      and Cho et al. (2014): the whole source is squeezed into the encoder's
      final state, bridged to the decoder's initial state s_0 and (Cho) fed to
      every decoder step.
    * `attention="bahdanau"` (or "luong", "luong_dot", "luong_concat"): the
      decoder looks at every encoder output h_i at every step (Bahdanau et al.
      2014; Luong et al. 2015).

    Training graph: `[source_ids, target_in_ids] → logits`
    `(batch_size, target_length, target_vocab_size)`.

    Mixed precision. Under the `mixed_float16` policy the layers compute in
    float16, except the decoder's output projection, which computes in
    float32 (as the Transformer's does): the logits of the training call and
    of `decode_step` are float32.

    GPUs. `use_cudnn` (default `False`: XLA training on a GPU) is
    `LSTMEncoder`'s; `encode` and `teacher_forced_attention` never use cuDNN
    (`lstms_without_cudnn`).

    Decoding contract: `encode(source_ids)` returns the dict
    `decoder_state` `(batch_size, units)`, and with attention `values`
    `(batch_size, source_length, encoder_dim)`, `keys`, `source_mask`
    `(batch_size, source_length)` and `attention_weights`
    `(batch_size, source_length)` (the last step's weights, for coverage
    penalties and plots); without attention `context` `(batch_size, units)`.
    `decode_step(token_ids, state, step)` runs `GRUDecoder.step`, the same
    function the training call scans over the target.

    Lengths. The model has no maximum source length: the LSTM encoder reads
    every source token, so `generate` and `translate` accept sources of any
    length (time and memory grow linearly; quality drops on sources much
    longer than the training ones; only a source tokenizer with `max_length`
    truncates, see `Seq2SeqModel.translate`). Targets stop after
    `max_target_length` tokens unless `max_length` is given.

    Coverage. Only attention models report attention weights, so a model
    built with `attention=None` rejects `coverage_penalty > 0` in beam search
    with a `ValueError`.
    """

    def __init__(self, source_vocab_size, target_vocab_size, embedding_dim=64, units=128,
                 encoder_units=None, attention="bahdanau", attention_units=None,
                 bidirectional=True, num_encoder_layers=1, dropout=0.0, share_embeddings=False,
                 sampling_probability=0.0, max_target_length=64, use_cudnn=False,
                 source_tokenizer=None, target_tokenizer=None, *args, **kwargs):
        # `*args`: keras.models.clone_model calls cls(inputs, outputs, name=...)
        # (see Seq2SeqModel._init_as_clone).
        if self._init_as_clone((source_vocab_size, target_vocab_size, *args), kwargs):
            return
        check_shared_vocabulary(share_embeddings, source_vocab_size, target_vocab_size)
        encoder_units = encoder_units or units
        shared = (
            keras.layers.Embedding(source_vocab_size, embedding_dim, name="shared_embedding")
            if share_embeddings else None
        )
        encoder = LSTMEncoder(
            source_vocab_size, embedding_dim, encoder_units, bidirectional=bidirectional,
            num_layers=num_encoder_layers, dropout=dropout, embedding=shared,
            use_cudnn=use_cudnn, name="encoder",
        )
        bridge = Bridge(units, name="bridge")
        decoder = GRUDecoder(
            target_vocab_size, embedding_dim, units,
            attention=attention, attention_units=attention_units,
            dropout=dropout, embedding=shared, sampling_probability=sampling_probability,
            name="decoder",
        )

        source_ids, target_in_ids = self._training_inputs()
        encoder_outputs, final_state = encoder(source_ids)
        initial_state = bridge(final_state)
        if attention is None:
            logits = decoder(target_in_ids, initial_state)
        else:
            source_mask = ops.not_equal(source_ids, 0)
            logits = decoder(target_in_ids, initial_state, encoder_outputs, source_mask)
        self._init_graph((source_ids, target_in_ids), logits, source_vocab_size,
                         target_vocab_size, source_tokenizer, target_tokenizer, **kwargs)

        self.encoder, self.bridge, self.decoder = encoder, bridge, decoder
        self.embedding_dim = embedding_dim
        self.units = units
        self.encoder_units = encoder_units
        self.attention = attention
        self.attention_units = attention_units
        self.bidirectional = bidirectional
        self.num_encoder_layers = num_encoder_layers
        self.dropout = dropout
        self.share_embeddings = share_embeddings
        self.sampling_probability = sampling_probability
        self.max_target_length = max_target_length
        self.use_cudnn = use_cudnn

    # ------------------------------------------------------------ contract
    def encode(self, source_ids, max_length=None):
        # max_length: the search's length limit; the recurrent state needs no
        # preallocation, so it does not depend on it (see Seq2SeqModel.encode).
        source_ids = ops.cast(source_ids, "int32")
        # Keras' own LSTM loop, never cuDNN: the searches run this under XLA on
        # a GPU, and an export's graph must also run where there is no cuDNN.
        with lstms_without_cudnn(self.encoder):
            encoder_outputs, final_state = self.encoder(source_ids, training=False)
        initial_state = self.bridge(final_state)
        source_mask = ops.not_equal(source_ids, 0)  # (batch_size, source_length)
        memory = self.decoder.prepare_memory(initial_state, encoder_outputs, source_mask)
        state = {"decoder_state": initial_state, **memory}
        if self.decoder.attention is not None:
            state[ATTENTION_WEIGHTS] = ops.zeros(ops.shape(source_ids), encoder_outputs.dtype)
        return state

    def decode_step(self, token_ids, state, step):
        memory = {key: state[key] for key in ("values", "keys", SOURCE_MASK, "context") if key in state}
        logits, new_decoder_state, weights = self.decoder.step(
            ops.cast(token_ids, "int32"), state["decoder_state"], memory, training=False
        )
        new_state = dict(state, decoder_state=new_decoder_state)
        if weights is not None:
            new_state[ATTENTION_WEIGHTS] = ops.cast(weights, state[ATTENTION_WEIGHTS].dtype)
        return ops.cast(logits, "float32"), new_state

    def check_search_config(self, config):
        """Refuse `coverage_penalty > 0` for a model built with `attention=None`.

        Raises:
            ValueError: the context-vector model has no attention weights.
        """
        if self.attention is None and config.method == "beam" and config.coverage_penalty > 0:
            raise ValueError(
                "coverage_penalty > 0 needs attention weights, but this model was built "
                "with attention=None (the context-vector model has none). Use "
                "coverage_penalty=0 or an attention model. Received: "
                f"coverage_penalty={config.coverage_penalty}"
            )

    def teacher_forced_attention(self, source_ids, target_in_ids):
        """Teacher-forced attention weights `(batch_size, target_length, source_length)`."""
        with lstms_without_cudnn(self.encoder):
            encoder_outputs, final_state = self.encoder(source_ids, training=False)
        _, weights = self.decoder(
            target_in_ids, self.bridge(final_state), encoder_outputs,
            ops.not_equal(source_ids, 0), training=False, return_attention_scores=True,
        )
        return weights


def build_rnn_seq2seq(
    source_vocab_size=None,
    target_vocab_size=None,
    embedding_dim=64,
    units=128,
    attention="bahdanau",
    source_tokenizer=None,
    target_tokenizer=None,
    **kwargs,
):
    """Build the recurrent encoder–decoder as a functional `keras.Model`.

    Args:
        source_vocab_size, target_vocab_size: ints; taken from the tokenizers'
            `vocabulary_size` when omitted.
        embedding_dim: int, embedding size (encoder and decoder).
        units: int, decoder GRU size (and encoder LSTM size unless
            `encoder_units` is given).
        attention: "bahdanau", "luong" ("luong_general"), "luong_dot",
            "luong_concat" or None (context-vector model).
        source_tokenizer, target_tokenizer: optional `TextTokenizer`s stored
            with the model so that `translate(texts)` and exports work.
        **kwargs: `encoder_units`, `attention_units`, `bidirectional`,
            `num_encoder_layers`, `dropout`, `share_embeddings`,
            `sampling_probability`, `max_target_length`, `use_cudnn` (see
            `LSTMEncoder`), `name`.

    Returns:
        An `RNNSeq2Seq` (a functional `keras.Model`
        `[source_ids, target_in_ids] → logits`) with `encode` / `decode_step`.

    Example:

    >>> model = build_rnn_seq2seq(40, 50, embedding_dim=16, units=32)
    >>> from kerasseq.training import MaskedSparseCategoricalCrossentropy
    >>> model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy())
    """
    return build_seq2seq(
        RNNSeq2Seq, source_vocab_size, target_vocab_size, source_tokenizer, target_tokenizer,
        embedding_dim=embedding_dim, units=units, attention=attention, **kwargs,
    )
