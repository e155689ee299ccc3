"""The Transformer encoder–decoder of "Attention Is All You Need", with a KV cache."""

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from kerasseq._replicas import sum_over_replicas
from kerasseq._validation import check_int, check_rate, is_int
from kerasseq.decoding.config import SearchConfigError
from kerasseq.decoding.contract import ATTENTION_WEIGHTS, SOURCE_MASK
from kerasseq.layers import (
    OutputProjection,
    PositionalEmbedding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from kerasseq.models.base import (
    Seq2SeqModel,
    build_seq2seq,
    check_shared_vocabulary,
    resolve_vocab_sizes,
)
from kerasseq.training.losses import guided_alignment_loss

SELF_KEY, SELF_VALUE = "layer_{}_self_key", "layer_{}_self_value"
CROSS_KEY, CROSS_VALUE = "layer_{}_cross_key", "layer_{}_cross_value"


class _MeanOfMeasured(keras.metrics.Mean):
    """A `Mean` that reads NaN, not 0, when nothing was measured: the
    `alignment_loss` of an evaluation whose batches carry no links."""

    def result(self):
        return ops.where(self.count > 0, ops.divide_no_nan(self.total, self.count),
                         float("nan"))


def _encoder_stack(embedding, dropout, blocks, final_norm, source_ids, source_mask, training=None):
    """Source ids `(batch_size, source_length)` → encoder outputs `(batch_size, source_length, d_model)`."""
    x = dropout(embedding(source_ids), training=training)
    for block in blocks:
        x = block(x, encoder_padding_mask=source_mask, training=training)
    return final_norm(x) if final_norm is not None else x


def _decoder_stack(embedding, dropout, blocks, final_norm, target_in_ids, encoder_outputs,
                   source_mask, training=None):
    """Teacher-forced decoder: `(batch_size, target_length, d_model)` and the
    last block's cross-attention `(batch_size, num_heads, target_length, source_length)`."""
    target_mask = ops.not_equal(target_in_ids, 0)  # (batch_size, target_length)
    x = dropout(embedding(target_in_ids), training=training)
    scores = []
    for block in blocks:
        x, block_scores = block(x, encoder_outputs, decoder_padding_mask=target_mask,
                                encoder_padding_mask=source_mask, return_attention_scores=True,
                                training=training)
        scores.append(block_scores)
    x = final_norm(x) if final_norm is not None else x
    return x, scores


@keras.saving.register_keras_serializable(package="kerasseq")
class TransformerSeq2Seq(Seq2SeqModel):
    """Transformer encoder–decoder (Vaswani et al., 2017) with a key/value cache.

    Training graph `[source_ids, target_in_ids] → logits`
    `(batch_size, target_length, target_vocab_size)`:

        source: PositionalEmbedding → Dropout → N × TransformerEncoderBlock (→ LayerNorm if pre-norm)
        target: PositionalEmbedding → Dropout → N × TransformerDecoderBlock (→ LayerNorm if pre-norm)
                → OutputProjection: x W + b (W = E^T with `tie_output=True`), float32

    The decoder blocks get the causal mask, the target padding mask
    (`target_in_ids != 0`) and, in cross-attention, the source padding mask
    (`source_ids != 0`).

    Decoding contract (docs/design.md). `encode(source_ids)` runs the encoder once
    and returns the flat state dict

    - `layer_{i}_cross_key`, `layer_{i}_cross_value`: every decoder block's
      cross-attention keys/values `(batch_size, source_length, num_heads, key_dim)`,
      projected once;
    - `layer_{i}_self_key`, `layer_{i}_self_value`: zero self-attention caches
      preallocated to `(batch_size, max_length, num_heads, key_dim)`, where
      `max_length` is `encode`'s argument (the search's; the translator
      passes it) or the position table's (static
      shapes across steps, so the decoding loop traces once and compiles with XLA);
    - `source_mask`: bool `(batch_size, source_length)`;
    - `attention_weights`: float32 `(batch_size, source_length)`, the last
      step's cross-attention averaged over heads *and* layers (for the
      coverage penalty of `beam_search`).

    `decode_step(token_ids, state, step)` embeds one token at position `step`,
    runs every block's sublayers step by step, as the block's `call_step`
    does (the causal self-attention writes position `step` into that block's
    self-attention cache and attends over positions `<= step`; the prefix is
    never re-run; the cross-attention of the hypotheses that share a source
    reads its one cache, `_shared_source_cross_attention`) and returns float32 logits
    `(batch_size, target_vocab_size)`. Its logits equal the teacher-forced
    call at every real (non-padding) target position.

    Lengths. Positions come from a fixed table of `max_positions` rows, so a
    source longer than `max_positions` tokens cannot be encoded: `generate` and
    `translate` raise a `ValueError` naming `max_positions` (trailing padding
    beyond `max_positions` is dropped, it changes nothing), and so does an eager
    `encode`; inside a `tf.function` `encode` fails with an
    `InvalidArgumentError` carrying the same message. Targets are limited to
    `max_positions` tokens too; `max_target_length` (default `max_positions`)
    is the default `max_length` of a search.

    Guided alignment (`guided_alignment_weight > 0`; Garg et al. 2019,
    OpenNMT-tf's `guided_alignment_weight`, fairseq's `transformer_align`).
    One cross-attention head, `guided_alignment_head` of decoder layer
    `guided_alignment_layer`, is trained to align: batches that carry
    reference links (`kerasseq.data.make_dataset(..., alignments=...)`: a
    dict of `source_ids`, `target_in_ids` and `alignment_links`
    `(batch_size, target_length, source_length)`) add
    `guided_alignment_weight × kerasseq.training.guided_alignment_loss` of
    that head to the loss, reported as the metric `alignment_loss` (NaN
    for an evaluation whose batches carry no links: not measured). The
    forward pass ignores the links (`model(x)` and `predict` read the two
    id inputs), and word alignments of such a model read the guided head
    by default (`kerasseq.alignment.default_alignment_head`).
    """

    def __init__(self, source_vocab_size, target_vocab_size, num_layers=2, d_model=128,
                 num_heads=4, dff=512, dropout=0.1, max_positions=64, max_target_length=None,
                 share_embeddings=False, tie_output=False, norm_first=False, layer_norm_epsilon=1e-5,
                 guided_alignment_weight=0.0, guided_alignment_layer=None,
                 guided_alignment_head=0, source_tokenizer=None, target_tokenizer=None,
                 *args, **kwargs):
        # `*args`: keras.models.clone_model calls cls(inputs, outputs, name=...)
        # (see Seq2SeqModel._init_as_clone).
        if self._init_as_clone((source_vocab_size, target_vocab_size, *args), kwargs):
            return
        _check_arguments(source_vocab_size, target_vocab_size, num_layers, d_model, num_heads,
                         dff, dropout, max_positions, share_embeddings)
        if max_target_length is None:
            max_target_length = max_positions
        max_target_length = check_int("max_target_length", max_target_length, 1,
                                      maximum=max_positions, maximum_name="max_positions")
        guided_alignment_weight, guided_alignment_layer, guided_alignment_head = (
            _check_guided_alignment(guided_alignment_weight, guided_alignment_layer,
                                    guided_alignment_head, num_layers, num_heads))
        block_args = dict(d_model=d_model, num_heads=num_heads, dff=dff, dropout=dropout,
                          norm_first=norm_first, layer_norm_epsilon=layer_norm_epsilon)
        target_embedding = PositionalEmbedding(target_vocab_size, d_model, max_positions,
                                               name="target_embedding")
        source_embedding = (
            target_embedding if share_embeddings
            else PositionalEmbedding(source_vocab_size, d_model, max_positions, name="source_embedding")
        )
        encoder_blocks = [TransformerEncoderBlock(**block_args, name=f"encoder_block_{i}")
                          for i in range(num_layers)]
        decoder_blocks = [TransformerDecoderBlock(**block_args, name=f"decoder_block_{i}")
                          for i in range(num_layers)]
        encoder_norm = decoder_norm = None
        if norm_first:  # pre-norm leaves the residual stream unnormalised
            encoder_norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="encoder_norm")
            decoder_norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="decoder_norm")
        source_dropout = keras.layers.Dropout(dropout, name="source_dropout")
        target_dropout = keras.layers.Dropout(dropout, name="target_dropout")
        output_projection = OutputProjection(
            target_vocab_size, embedding=target_embedding.token_embedding if tie_output else None,
            dtype="float32", name="output_projection",
        )

        source_ids, target_in_ids = self._training_inputs()
        source_mask = ops.not_equal(source_ids, 0)
        encoder_outputs = _encoder_stack(source_embedding, source_dropout, encoder_blocks,
                                         encoder_norm, source_ids, source_mask)
        x, _ = _decoder_stack(target_embedding, target_dropout, decoder_blocks, decoder_norm,
                              target_in_ids, encoder_outputs, source_mask)
        logits = output_projection(x)
        self._init_graph((source_ids, target_in_ids), logits, source_vocab_size,
                         target_vocab_size, source_tokenizer, target_tokenizer, **kwargs)

        self.source_embedding, self.target_embedding = source_embedding, target_embedding
        self.source_dropout, self.target_dropout = source_dropout, target_dropout
        self.encoder_blocks, self.decoder_blocks = encoder_blocks, decoder_blocks
        self.encoder_norm, self.decoder_norm = encoder_norm, decoder_norm
        self.output_projection = output_projection
        self.num_layers = num_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.key_dim = d_model // num_heads
        self.dff = dff
        self.dropout = dropout
        self.max_positions = max_positions
        self.share_embeddings = share_embeddings
        self.tie_output = tie_output
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.max_target_length = max_target_length
        self.guided_alignment_weight = guided_alignment_weight
        self.guided_alignment_layer = guided_alignment_layer
        self.guided_alignment_head = guided_alignment_head
        if guided_alignment_weight > 0:
            self.alignment_loss_tracker = _MeanOfMeasured(name="alignment_loss")

    # ------------------------------------------------------ guided alignment
    @property
    def guided_head(self):
        """`(layer, head)` trained to align, or `None` for a model trained without guidance."""
        if self.guided_alignment_weight > 0:
            return self.guided_alignment_layer, self.guided_alignment_head
        return None

    def compute_predictions_and_loss(self, x, y, sample_weight=None, training=True):
        """`(logits, loss)` of a batch; with alignment links, plus the guided term.

        A batch without `alignment_links` is `Seq2SeqModel`'s. With them the
        forward pass runs once, keeping the guided head's attention, and the
        loss is the compiled loss plus `guided_alignment_weight ×
        guided_alignment_loss(links, attention)` (each replica's share of the
        global mean under a strategy); `alignment_loss` is updated with the
        global value.

        Raises:
            ValueError: the batch carries links but the model was built
                without guidance (`guided_alignment_weight=0`).
        """
        if not (isinstance(x, dict) and "alignment_links" in x):
            return super().compute_predictions_and_loss(x, y, sample_weight, training)
        if self.guided_head is None:
            raise ValueError(
                "The batch carries alignment_links, but the model was built with "
                "guided_alignment_weight=0 (no head to guide). Build it with "
                "guided_alignment_weight > 0, or make the dataset without alignments.")
        logits, attention = self._logits_and_guided_attention(
            x["source_ids"], x["target_in_ids"], training)
        loss = self.compute_loss(x=x, y=y, y_pred=logits, sample_weight=sample_weight,
                                 training=training)
        alignment = guided_alignment_loss(x["alignment_links"], attention, sample_weight=sample_weight)
        self.alignment_loss_tracker.update_state(sum_over_replicas(alignment))
        return logits, loss + ops.cast(self.guided_alignment_weight, loss.dtype) * alignment

    def _teacher_forced(self, source_ids, target_in_ids, training):
        """The training graph run layer by layer: the decoder's output
        `(batch_size, target_length, d_model)` and every block's
        cross-attention, each `(batch_size, num_heads, target_length, source_length)`."""
        source_ids = ops.cast(source_ids, "int32")
        target_in_ids = ops.cast(target_in_ids, "int32")
        source_mask = ops.not_equal(source_ids, 0)
        encoder_outputs = _encoder_stack(self.source_embedding, self.source_dropout,
                                         self.encoder_blocks, self.encoder_norm,
                                         source_ids, source_mask, training=training)
        return _decoder_stack(self.target_embedding, self.target_dropout, self.decoder_blocks,
                              self.decoder_norm, target_in_ids, encoder_outputs, source_mask,
                              training=training)

    def _logits_and_guided_attention(self, source_ids, target_in_ids, training):
        """Logits and the guided head's attention, from one teacher-forced pass."""
        x, scores = self._teacher_forced(source_ids, target_in_ids, training)
        attention = scores[self.guided_alignment_layer][:, self.guided_alignment_head]
        # (batch_size, target_length, source_length)
        return self.output_projection(x), attention

    # ------------------------------------------------------------ contract
    def encode(self, source_ids, max_length=None):
        """The decoding state of `source_ids` (see the class docstring).

        Args:
            source_ids: int `(batch_size, source_length)`, 0 = padding.
            max_length: optional int in `[1, self.max_positions]`, the most
                target tokens the search will generate: the self-attention
                caches get that many positions (default `max_positions`,
                the whole position table). A smaller cache is cheaper at
                every step (attention and beam reordering run over it).
        """
        if max_length is None:
            max_length = self.max_positions
        elif not is_int(max_length) or not 1 <= max_length <= self.max_positions:
            raise ValueError(f"max_length must be an int in [1, {self.max_positions}] (the position "
                             f"table). Received: max_length={max_length!r}")
        source_ids = self.trim_source_ids(ops.cast(source_ids, "int32"))
        # (batch_size, source_length <= max_positions)
        source_mask = ops.not_equal(source_ids, 0)  # (batch_size, source_length)
        encoder_outputs = _encoder_stack(self.source_embedding, self.source_dropout,
                                         self.encoder_blocks, self.encoder_norm,
                                         source_ids, source_mask, training=False)
        # (batch_size, source_length, d_model)
        batch_size = ops.shape(source_ids)[0]
        state = {SOURCE_MASK: source_mask}
        for i, block in enumerate(self.decoder_blocks):
            (self_key, self_value), (cross_key, cross_value) = block.build_cache(
                batch_size=batch_size, max_length=int(max_length), context=encoder_outputs)
            # self: each (batch_size, max_length, num_heads, key_dim);
            # cross: each (batch_size, source_length, num_heads, key_dim)
            state[CROSS_KEY.format(i)], state[CROSS_VALUE.format(i)] = cross_key, cross_value
            state[SELF_KEY.format(i)], state[SELF_VALUE.format(i)] = self_key, self_value
        state[ATTENTION_WEIGHTS] = ops.zeros(ops.shape(source_ids), "float32")
        return state

    @property
    def shared_state_keys(self):
        """State keys that are the same for every hypothesis of a source.

        The cross-attention keys/values of every decoder layer: beam search
        (`kerasseq.decoding.beam_search(shared_state=...)`, which the
        `kerasseq.Translator` passes) keeps one copy per source instead of
        one per beam, and `decode_step` attends a source's hypotheses
        together against it (`_shared_source_cross_attention`).
        """
        return tuple(key.format(i) for i in range(len(self.decoder_blocks))
                     for key in (CROSS_KEY, CROSS_VALUE))

    def decode_step(self, token_ids, state, step):
        token_ids = ops.reshape(ops.cast(token_ids, "int32"), (-1, 1))  # (batch_size, 1)
        x = self.target_embedding(token_ids, start_index=step)  # (batch_size, 1, d_model)
        new_state = dict(state)
        weights = 0.0
        for i, block in enumerate(self.decoder_blocks):
            # The block's call_step, with the cross-attention of hypotheses sharing a cache.
            self_cache = (state[SELF_KEY.format(i)], state[SELF_VALUE.format(i)])
            cross_cache = (state[CROSS_KEY.format(i)], state[CROSS_VALUE.format(i)])
            x, self_cache, _ = block.causal_self_attention.call_step(x, step, self_cache)
            x, scores = _shared_source_cross_attention(block.cross_attention, x, cross_cache,
                                                       state[SOURCE_MASK])
            x = block.feed_forward(x, training=False)
            # x (batch_size, 1, d_model); scores (batch_size, num_heads, 1, source_length)
            new_state[SELF_KEY.format(i)], new_state[SELF_VALUE.format(i)] = self_cache
            weights = weights + ops.mean(ops.cast(scores[:, :, 0, :], "float32"), axis=1)
            # (batch_size, source_length)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        logits = self.output_projection(x)[:, 0, :]  # (batch_size, target_vocab_size)
        new_state[ATTENTION_WEIGHTS] = weights / len(self.decoder_blocks)
        return ops.cast(logits, "float32"), new_state

    def check_search_config(self, config):
        """The Transformer's length limits on searches: its position table.

        Raises:
            SearchConfigError: (a `ValueError`) `max_length` (target tokens)
                or `max_source_length` exceeds the model's `max_positions` (its
                self-attention cache and position tables); `.field` names it.
        """
        for field in ("max_length", "max_source_length"):
            value = getattr(config, field)
            if value is not None and value > self.max_positions:
                raise SearchConfigError(
                    field, f"{field} must be <= the model's max_positions={self.max_positions} "
                    f"(its position table). Received: {field}={value}")

    def trim_source_ids(self, source_ids):
        """Keeps the first `max_positions` columns; the dropped ones must be padding."""
        message = (f"A source has more than max_positions={self.max_positions} tokens, the length "
                   "of the model's position table. Shorten or split the input, or build the "
                   "model with a larger max_positions.")
        if isinstance(source_ids, np.ndarray) or tf.executing_eagerly():
            array = np.asarray(source_ids)
            real_lengths = np.where(array != 0, np.arange(array.shape[1]) + 1, 0).max(axis=1, initial=0)
            if real_lengths.size and real_lengths.max() > self.max_positions:
                raise ValueError(f"{message} Received: source length={int(real_lengths.max())}")
            return source_ids[:, : self.max_positions]
        dropped = source_ids[:, self.max_positions:]
        check = tf.debugging.assert_equal(tf.reduce_any(dropped != 0), False, message=message)
        with tf.control_dependencies([check]):
            return tf.identity(source_ids[:, : self.max_positions])

    # ------------------------------------------------------------ plotting
    def cross_attention_weights(self, source_ids, target_in_ids, layer=-1):
        """Teacher-forced cross-attention of one decoder layer (default: the last).

        Args:
            source_ids: int `(batch_size, source_length)`, 0 = padding.
            target_in_ids: int `(batch_size, target_length)`, start token first.
            layer: index into the decoder blocks.

        Returns:
            `(batch_size, num_heads, target_length, source_length)`; every
            row sums to 1 over the real source tokens.
        """
        _, scores = self._teacher_forced(source_ids, target_in_ids, training=False)
        return ops.cast(scores[layer], "float32")

    def alignment_features(self, source_ids, target_in_ids, layer=0):
        """What decoder layer `layer`'s cross-attention reads in a teacher-forced pass.

        The decoder runs up to that layer's cross-attention (inference mode,
        no dropout) and stops: the query inputs are the self-attention
        sublayer's output (after its LayerNorm when pre-norm), the keys the
        encoder outputs. `kerasseq.alignment.ShiftedAlignmentHead` attends
        with its own projections over them; with a head's projection weights
        copied in, its attention is that head's (tested).

        Args:
            source_ids: int `(batch_size, source_length)`, 0 = padding.
            target_in_ids: int `(batch_size, target_length)`, start token first.
            layer: int index into the decoder blocks (negative counts from the end).

        Returns:
            `(queries, encoder_outputs, source_mask)`: `(batch_size,
            target_length, d_model)`, `(batch_size, source_length, d_model)`
            and bool `(batch_size, source_length)`.
        """
        num_layers = len(self.decoder_blocks)
        if isinstance(layer, bool) or not isinstance(layer, int) or not -num_layers <= layer < num_layers:
            raise ValueError(f"layer must be an int in [{-num_layers}, {num_layers - 1}] (the "
                             f"decoder has {num_layers} layers). Received: layer={layer!r}")
        layer %= num_layers
        source_ids = ops.cast(source_ids, "int32")
        target_in_ids = ops.cast(target_in_ids, "int32")
        source_mask = ops.not_equal(source_ids, 0)
        target_mask = ops.not_equal(target_in_ids, 0)
        encoder_outputs = _encoder_stack(self.source_embedding, self.source_dropout,
                                         self.encoder_blocks, self.encoder_norm,
                                         source_ids, source_mask, training=False)
        x = self.target_embedding(target_in_ids)
        for index, block in enumerate(self.decoder_blocks):
            x = block.causal_self_attention(x, decoder_padding_mask=target_mask, training=False)
            if index == layer:
                cross = block.cross_attention
                queries = cross.layer_norm(x) if cross.norm_first else x
                return queries, encoder_outputs, source_mask
            x = block.cross_attention(x, encoder_outputs, encoder_padding_mask=source_mask,
                                      training=False)
            x = block.feed_forward(x, training=False)
        raise AssertionError("unreachable: layer was checked")

    def teacher_forced_attention(self, source_ids, target_in_ids):
        """Head-averaged last-layer cross-attention `(batch_size, target_length, source_length)`
        (the same shape as `RNNSeq2Seq.teacher_forced_attention`, for the plotting helpers)."""
        return ops.mean(self.cross_attention_weights(source_ids, target_in_ids), axis=1)


def _shared_source_cross_attention(cross_attention, x, cache, source_mask):
    """`CrossAttention.call_step` of hypotheses that share their source's cache.

    The cache may have fewer rows than `x`: `batch_size = source_rows * group`,
    the `group` adjacent rows of `x` decoding the same source (the hypotheses
    of a beam search, `kerasseq.decoding.beam_search(shared_state=...)`). The
    queries of a group attend together, as one query sequence of `group`
    positions against their source's keys: cross-attention has no causal
    mask, so every position's result is the same as with keys tiled to
    `batch_size` rows, without reading `group` copies of them. With
    `group = 1` this is the plain step.

    Args:
        cross_attention: a decoder block's `CrossAttention`.
        x: `(batch_size, 1, d_model)`.
        cache: `(key_cache, value_cache)`, each `(source_rows, source_length,
            num_heads, key_dim)`, `source_rows` dividing `batch_size`.
        source_mask: bool `(batch_size, source_length)` or `(source_rows,
            source_length)`.

    Returns:
        `(outputs, scores)`: `(batch_size, 1, d_model)` and `(batch_size,
        num_heads, 1, source_length)`.
    """
    rows, d_model = ops.shape(x)[0], ops.shape(x)[2]
    source_rows, source_length = ops.shape(cache[0])[0], ops.shape(cache[0])[1]
    queries = ops.reshape(x, (source_rows, -1, d_model))  # (source_rows, group, d_model)
    source_mask = ops.reshape(source_mask, (source_rows, -1, source_length))[:, 0]
    # (source_rows, source_length): the rows of a group share their source
    outputs, _, scores = cross_attention.call_step(queries, None, cache,
                                                   encoder_padding_mask=source_mask)
    # scores (source_rows, num_heads, group, source_length)
    scores = ops.reshape(ops.transpose(scores, (0, 2, 1, 3)), (rows, -1, 1, source_length))
    return ops.reshape(outputs, (rows, 1, d_model)), scores


def _check_arguments(source_vocab_size, target_vocab_size, num_layers, d_model, num_heads,
                     dff, dropout, max_positions, share_embeddings):
    resolve_vocab_sizes(source_vocab_size, target_vocab_size, None, None)
    for name, value in (("num_layers", num_layers), ("d_model", d_model), ("num_heads", num_heads),
                        ("dff", dff), ("max_positions", max_positions)):
        check_int(name, value)
    if d_model % num_heads:
        raise ValueError("d_model must be divisible by num_heads. "
                         f"Received: d_model={d_model}, num_heads={num_heads}")
    check_rate("dropout", dropout)
    check_shared_vocabulary(share_embeddings, source_vocab_size, target_vocab_size)


def _check_guided_alignment(weight, layer, head, num_layers, num_heads):
    """`(weight, layer, head)` checked, the indices made non-negative.

    `layer=None` is the penultimate decoder layer (the last one of a
    one-layer model), where Garg et al. (2019) found a Transformer aligns best.
    """
    if isinstance(weight, bool) or not isinstance(weight, (int, float, np.number)) or not (
            np.isfinite(weight) and weight >= 0):
        raise ValueError("guided_alignment_weight must be a finite number >= 0 (0: no guidance). "
                         f"Received: guided_alignment_weight={weight!r}")
    if layer is None:
        layer = max(num_layers - 2, 0)
    for name, value, size in (("guided_alignment_layer", layer, num_layers),
                              ("guided_alignment_head", head, num_heads)):
        if not is_int(value) or not -size <= value < size:
            what = "decoder layers" if name.endswith("layer") else "heads"
            raise ValueError(f"{name} must be an int in [{-size}, {size - 1}] (the model has "
                             f"{size} {what}). Received: {name}={value!r}")
    return float(weight), int(layer) % num_layers, int(head) % num_heads


def build_transformer_seq2seq(source_vocab_size=None, target_vocab_size=None, num_layers=2,
                              d_model=128, num_heads=4, dff=512, dropout=0.1, max_positions=64,
                              max_target_length=None, share_embeddings=False, tie_output=False,
                              norm_first=False, source_tokenizer=None, target_tokenizer=None,
                              **kwargs):
    """Build the Transformer encoder–decoder as a functional `keras.Model`.

    Args:
        source_vocab_size, target_vocab_size: ints; taken from the tokenizers'
            `vocabulary_size` when omitted.
        num_layers: int, encoder blocks and decoder blocks (N in the paper).
        d_model: int, model width; divisible by `num_heads`.
        num_heads: int, attention heads (h); `key_dim = d_model // num_heads`.
        dff: int, feed-forward hidden width.
        dropout: float in `[0, 1)`, used on embeddings and in every sublayer.
        max_positions: int, positions in the positional tables and in the
            self-attention cache: the longest source and target (keras-hub's
            `sequence_length`). Not a search setting: a search's
            `max_length` (target tokens) may be smaller.
        max_target_length: int in `[1, max_positions]`, the default
            `max_length` of a search (default: `max_positions`).
        share_embeddings: one embedding matrix for source and target (needs
            `source_vocab_size == target_vocab_size`).
        tie_output: compute logits with the transposed target embedding
            matrix, `x E^T + b`, instead of a separate Dense layer.
        norm_first: pre-norm blocks (plus a final LayerNorm on each stack)
            instead of the paper's post-norm.
        source_tokenizer, target_tokenizer: optional `TextTokenizer`s stored
            with the model so that `translate(texts)` and exports work.
        **kwargs: `layer_norm_epsilon`, `name`, and guided alignment:
            `guided_alignment_weight` (float >= 0, default 0: none),
            `guided_alignment_layer` (int; default the penultimate decoder
            layer), `guided_alignment_head` (int, default 0); see
            `TransformerSeq2Seq`.

    Returns:
        A `TransformerSeq2Seq` (a functional `keras.Model`
        `[source_ids, target_in_ids] → logits`) with `encode` / `decode_step`.

    Example:

    >>> model = build_transformer_seq2seq(40, 50, num_layers=1, d_model=32, num_heads=4, dff=64)
    >>> from kerasseq.training import MaskedSparseCategoricalCrossentropy
    >>> model.compile(optimizer="adam", loss=MaskedSparseCategoricalCrossentropy())
    """
    return build_seq2seq(
        TransformerSeq2Seq, source_vocab_size, target_vocab_size, source_tokenizer,
        target_tokenizer, num_layers=num_layers, d_model=d_model, num_heads=num_heads, dff=dff,
        dropout=dropout, max_positions=max_positions, max_target_length=max_target_length,
        share_embeddings=share_embeddings, tie_output=tie_output, norm_first=norm_first, **kwargs,
    )
