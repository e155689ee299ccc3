"""A shifted alignment head: a frozen Transformer's word alignments, learned from reference links.

Guided alignment (Garg et al. 2019; `TransformerSeq2Seq(guided_alignment_weight=...)`)
teaches one cross-attention head to align, and its row for target piece t is
read at the position that *predicts* piece t: a position that has not seen
the word it is asked to align. Chen et al. (2020, "Accurate Word Alignment
Induction from Neural Machine Translation") read one position later instead
(Shift-Att: the position whose *input* is piece t) and train a separate
alignment module on the frozen translation model (Shift-AET). A
`ShiftedAlignmentHead` is that module, taught by reference links as the
guided head is:

    a_t(i) = softmax_i( (q_{t+s} W_q + b_q) · (h_i W_k + b_k) / sqrt(d_k) )

over the real source pieces i, where q_p is the query input of decoder layer
`layer`'s cross-attention at position p of the teacher-forced pass over
`[START] + target` (`TransformerSeq2Seq.alignment_features`), h_i the
encoder output of source piece i, and s the `shift`: 1 reads piece t at the
position fed piece t, 0 at the position predicting it (where a guided head
is read). Training (`train_alignment_head`) minimises the guided-alignment
cross-entropy (`kerasseq.training.losses.guided_alignment_loss`) against
reference links (eflomal's, `reference_alignments`) on the head's weights
only: the translation model is not changed, so its translations and scores
stay what they were.

On the Spanish → English Bible model of docs/results.md (one vocabulary,
guided head at layer 1) a head at layer 0 with shift 1 raised the F1
against Strong's links from 0.279 (the guided head, read both ways) to
0.303 on dev and from 0.273 to 0.296 on test, level with eflomal (0.301 and
0.295 in the same runs); the same head read at the position predicting
the word (shift 0) scored lower on dev (docs/results.md, "A shifted head
on the frozen model", has the figures).

    head, losses = train_alignment_head(model, sources, targets, links)
    results = align_texts(model, sources, targets, aligner=head)
    head.save("aligner.keras")   # keras.models.load_model after `import kerasseq`

The head serves forced alignment (`align_ids`, `align_texts`): a reference
or a given translation read with teacher forcing. `translate(...,
return_alignments=True)`, the `Translator` and the export still read the
model's own heads (`default_alignment_head`).
"""

import math

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from kerasseq._validation import check_positive_int
from kerasseq.data.tokenizer import START_ID


def _check_layer_and_shift(layer, shift):
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
        raise ValueError(f"layer must be an int (a decoder layer). Received: layer={layer!r}")
    if isinstance(shift, bool) or shift not in (0, 1):
        raise ValueError("shift must be 0 (read piece t at the position predicting it) or 1 "
                         f"(at the position fed piece t). Received: shift={shift!r}")
    return int(layer), int(shift)


@keras.saving.register_keras_serializable(package="kerasseq")
class ShiftedAlignmentHead(keras.Model):
    """One attention head that aligns, over a frozen Transformer's features (see the module).

    Args:
        d_model: int, the Transformer's width (its `d_model`).
        key_dim: int, the width of the projected queries and keys.
        layer: int, the decoder layer whose cross-attention inputs are read
            (`TransformerSeq2Seq.alignment_features`).
        shift: 0 or 1, see the module docstring.

    The key bias `b_k` adds the same term to every source piece's score,
    which the softmax cancels; it is kept so that a model head's projections
    (kernel and bias) copy in whole.

    Call: `head((queries, keys, source_mask))` with `(batch_size,
    query_length, d_model)`, `(batch_size, source_length, d_model)` and bool
    `(batch_size, source_length)` gives the attention `(batch_size,
    query_length, source_length)`, each row summing to 1 over the real
    source pieces (0 on padding).
    """

    def __init__(self, d_model, key_dim=64, layer=0, shift=1, **kwargs):
        super().__init__(**kwargs)
        self.d_model = check_positive_int("d_model", d_model)
        self.key_dim = check_positive_int("key_dim", key_dim)
        self.layer, self.shift = _check_layer_and_shift(layer, shift)
        self.query_projection = keras.layers.Dense(self.key_dim, name="query_projection")
        self.key_projection = keras.layers.Dense(self.key_dim, name="key_projection")
        self.query_projection.build((None, None, self.d_model))
        self.key_projection.build((None, None, self.d_model))
        self.built = True
        self.supports_masking = True  # the embeddings' padding mask rides on the queries

    def compute_mask(self, inputs, mask=None):
        return None  # padding is in source_mask; the rows of padded pieces are not read

    def call(self, inputs):
        queries, keys, source_mask = inputs
        q = self.query_projection(ops.cast(queries, self.compute_dtype))
        k = self.key_projection(ops.cast(keys, self.compute_dtype))
        scores = ops.einsum("btd,bsd->bts", q, k) * ops.cast(1.0 / math.sqrt(self.key_dim),
                                                             q.dtype)
        scores = ops.cast(scores, "float32")
        mask = ops.cast(source_mask, "bool")[:, None, :]  # (batch_size, 1, source_length)
        scores = ops.where(mask, scores, ops.full_like(scores, -1e9))
        weights = ops.softmax(scores, axis=-1)
        return ops.where(mask, weights, ops.zeros_like(weights))

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, key_dim=self.key_dim, layer=self.layer,
                      shift=self.shift)
        return config

    # ------------------------------------------------------------------ reading
    def check_model(self, model):
        """Raise a `ValueError` unless `model` is a Transformer this head can read."""
        if not hasattr(model, "alignment_features") or not hasattr(model, "decoder_blocks"):
            raise ValueError(f"A ShiftedAlignmentHead reads a TransformerSeq2Seq's decoder; "
                             f"{type(model).__name__} {getattr(model, 'name', '')!r} has none.")
        if getattr(model, "d_model", None) != self.d_model:
            raise ValueError(f"This head was built for d_model={self.d_model}; the model has "
                             f"d_model={getattr(model, 'd_model', None)}.")
        num_layers = len(model.decoder_blocks)
        if not -num_layers <= self.layer < num_layers:
            raise ValueError(f"This head reads decoder layer {self.layer}; the model has "
                             f"{num_layers} decoder layers.")

    def target_inputs(self, target_ids):
        """`[START] + target` for each padded row of `target_ids` (int `(batch, pieces)`, no
        `[START]`/`[END]`): `pieces + 1` positions, the last piece fed at the last one."""
        target_ids = tf.cast(target_ids, tf.int32)
        start = tf.fill([tf.shape(target_ids)[0], 1], START_ID)
        return tf.concat([start, target_ids], axis=1)

    def piece_attention(self, model, source_ids, target_ids):
        """The head's attention for every target piece: float32 `(batch, target_pieces,
        source_pieces)`; row t belongs to target piece t (rows past a row's pieces and
        padded source columns are meaningless / 0).

        Args:
            model: the `TransformerSeq2Seq` the head was trained on.
            source_ids: int `(batch, source_pieces)`, 0 = padding.
            target_ids: int `(batch, target_pieces)`, 0 = padding, without
                `[START]` / `[END]`.

        Raises:
            ValueError: see `check_model`; a target of more pieces than the
                model's position table holds after `[START]`.
        """
        self.check_model(model)
        target_ids = tf.convert_to_tensor(target_ids, tf.int32)
        pieces = int(target_ids.shape[1])
        limit = getattr(model, "max_positions", None)
        if limit is not None and pieces + 1 > limit:
            raise ValueError(f"A target of {pieces} pieces needs {pieces + 1} positions "
                             f"([START] + pieces); the model's position table has {limit}.")
        queries, keys, source_mask = model.alignment_features(
            tf.convert_to_tensor(source_ids, tf.int32), self.target_inputs(target_ids),
            self.layer)
        return self((queries[:, self.shift:self.shift + pieces], keys, source_mask))


def train_alignment_head(model, sources, targets, links, layer=0, shift=1, key_dim=64, epochs=3,
                         batch_size=64, learning_rate=2e-3, seed=0, verbose=1):
    """A `ShiftedAlignmentHead` trained on a frozen Transformer against reference links.

    Batches come from `kerasseq.data.make_dataset(..., alignments=links)`
    (length buckets, shuffled with `seed`; pairs longer than the model's
    position table are left out); the loss of a batch is
    `guided_alignment_loss` between the head's rows and the links of the
    pieces they read; Adam updates the head's weights only.

    Args:
        model: a trained `TransformerSeq2Seq` with its tokenizers.
        sources, targets: lists of str (training pairs only: dev and test
            stay unseen).
        links: one entry per pair, `(target_piece, source_piece)` int pairs
            (`reference_alignments` makes them from eflomal).
        layer, shift, key_dim: see `ShiftedAlignmentHead`.
        epochs, batch_size, learning_rate, seed: the training loop's.
        verbose: 0 silent, 1 a line per epoch.

    Returns:
        `(head, losses)`: the trained head and the mean batch loss of each epoch.

    Raises:
        ValueError: a model without a Transformer decoder or tokenizers, a
            bad `layer`/`shift`, lists of different lengths, no pair short
            enough for the position table (and whatever `make_dataset`
            refuses in `links`).
    """
    from kerasseq.data.pipeline import make_dataset, split_inputs
    from kerasseq.training.losses import guided_alignment_loss

    if not len(sources) == len(targets) == len(links):
        raise ValueError("sources, targets and links must hold one entry per pair. Received "
                         f"{len(sources)}, {len(targets)} and {len(links)}.")
    if getattr(model, "source_tokenizer", None) is None or getattr(
            model, "target_tokenizer", None) is None:
        raise ValueError("train_alignment_head needs a model built with source_tokenizer and "
                         "target_tokenizer.")
    epochs = check_positive_int("epochs", epochs)
    head = ShiftedAlignmentHead(model.d_model, key_dim=key_dim, layer=layer, shift=shift)
    head.check_model(model)
    limit = model.max_positions
    dataset = make_dataset(list(zip(sources, targets, strict=True)), model.source_tokenizer,
                           model.target_tokenizer, batch_size=batch_size, seed=seed,
                           bucket_boundaries="auto", max_source_length=limit,
                           max_target_length=limit, alignments=links, fixed_shapes=False)
    optimizer = keras.optimizers.Adam(learning_rate)

    @tf.function(reduce_retracing=True)
    def step(source_ids, target_in_ids, batch_links):
        # target_in_ids: [START] + target; batch_links row t: target piece t ([END]'s row empty)
        queries, keys, source_mask = model.alignment_features(source_ids, target_in_ids,
                                                              head.layer)
        rows = tf.shape(target_in_ids)[1] - head.shift
        with tf.GradientTape() as tape:
            attention = head((queries[:, head.shift:], keys, source_mask))
            loss = guided_alignment_loss(batch_links[:, :rows], attention)
        gradients = tape.gradient(loss, head.trainable_variables)
        optimizer.apply_gradients(zip(gradients, head.trainable_variables, strict=True))
        return loss

    losses = []
    for epoch in range(epochs):
        total, batches = 0.0, 0
        for inputs, _ in dataset:
            source_ids, target_in_ids, batch_links = split_inputs(inputs)
            total += float(step(source_ids, target_in_ids, batch_links))
            batches += 1
        if not batches:
            raise ValueError(f"No training pair fits the model's position table ({limit}): "
                             "nothing to train the alignment head on.")
        losses.append(total / batches)
        if verbose:
            print(f"alignment head epoch {epoch + 1}/{epochs}: loss {losses[-1]:.4f} "
                  f"({batches} batches)", flush=True)
    return head, losses


__all__ = ["ShiftedAlignmentHead", "train_alignment_head"]
