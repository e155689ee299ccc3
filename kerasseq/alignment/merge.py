"""Word alignments from attention: the attention of pieces merged into words, read as links.

An attention model says, at every output position, how much it looked at
each source position. Reading the largest weight as a link gives a word
alignment for free, as OpenNMT-tf's `with_alignments` and fairseq's
`--print-alignment` do: target word j is linked to the source word i it
attended to most.

Models work on subword pieces, people on words. The attention matrix of
pieces is merged into one of words (`merge_pieces`): the weights of a source
word's pieces are *added* (the attention paid to the word), the rows of a
target word's pieces are *averaged* (each row sums to 1, so the word's row
does too). A piece starts a word unless it carries WordPiece's `##` prefix;
with a word- or character-level `TextTokenizer` every token is a word.

Which attention?

- `RNNSeq2Seq` (Bahdanau/Luong): its one attention distribution.
- `TransformerSeq2Seq`: `num_layers` × `num_heads` cross-attention
  distributions. `layer` picks one decoder layer (an index) or `"mean"`
  (the average over layers); `head` picks one head (an index) or `"mean"`
  (the average over heads). The default of every alignment in kerasseq
  (`align_texts`, `translate`, `Translator`, the export, the command line),
  `ALIGNMENT_LAYER` and `ALIGNMENT_HEAD`, is the mean over every layer and
  head (a model trained with guided alignment: its guided head, see
  `default_alignment_head`). Which layer and head align best is an
  empirical question; on the Spanish → English Bible model
  (docs/tutorial_bible.md; 3+3 layers, 1,576 test verses, 67,062 Strong's
  links) the mean's F1 was 0.245, the middle layer's mean 0.241 (fairseq's
  and OpenNMT-py's penultimate layer), the last layer's 0.233, single
  heads 0.057-0.229 (eflomal: 0.295).

The links are read from a teacher-forced pass over `[START] + target`: for a
hypothesis of the model that pass gives exactly the attention of the search
(`decode_step` equals the teacher-forced `call`, tested for every model), and
for a reference translation it gives a forced alignment, which is how
attention is scored against gold links (`alignment_scores`).

    translations, links = model.translate(["la luz"], return_alignments=True)
    # "the light", [[(0, 0), (1, 1)]]   (source word, target word) pairs
"""

import numpy as np
import tensorflow as tf

from kerasseq.alignment.scores import symmetrize
from kerasseq.data.tokenizer import PAD_ID, START_ID
from kerasseq.data.wordpiece_tokenizer import SUFFIX_INDICATOR
from kerasseq.decoding import contract
from kerasseq.decoding.config import SearchConfig

ALIGNMENT_LAYER = "mean"
ALIGNMENT_HEAD = "mean"


def default_alignment_head(model):
    """`(layer, head)` that `model`'s alignments read when none are given.

    A Transformer trained with guided alignment (`guided_alignment_weight >
    0`) answers its guided head: the one cross-attention head that was
    taught to align. Every other model answers `(ALIGNMENT_LAYER,
    ALIGNMENT_HEAD)`.
    """
    guided = getattr(model, "guided_head", None)
    return guided if guided is not None else (ALIGNMENT_LAYER, ALIGNMENT_HEAD)


def resolve_alignment_head(model, layer=None, head=None):
    """`(layer, head)` with `None` replaced by `model`'s default (`default_alignment_head`)."""
    default_layer, default_head = default_alignment_head(model)
    return (default_layer if layer is None else layer,
            default_head if head is None else head)


def continuation_table(tokenizer):
    """bool NumPy `(vocabulary_size,)`: which ids continue a word (`##` pieces).

    All False for a tokenizer without `##` pieces (every token is a word).
    """
    vocabulary = tokenizer.get_vocabulary() if hasattr(tokenizer, "get_vocabulary") else []
    return np.array([token.startswith(SUFFIX_INDICATOR) and token != SUFFIX_INDICATOR
                     for token in vocabulary] or [False], bool)


def word_starts(tokenizer, ids):
    """Which ids start a word: bool NumPy array of the shape of `ids`.

    A WordPiece continuation (`##` prefix) continues the word before it;
    every other id (also `[UNK]`) starts one. Tokenizers without `##`
    pieces start a word at every id.
    """
    ids = np.asarray(ids)
    continuation = continuation_table(tokenizer) if tokenizer is not None else np.zeros(1, bool)
    known = (ids >= 0) & (ids < len(continuation))
    return ~np.where(known, continuation[np.clip(ids, 0, len(continuation) - 1)], False)


def _word_one_hot(ids, continuation):
    """`(batch, pieces, pieces)` float32: piece p belongs to word w (0 for padding),
    and the number of words per row (int32 `(batch,)`)."""
    ids = tf.cast(ids, tf.int32)
    real = ids != PAD_ID  # (batch, pieces)
    safe = tf.clip_by_value(ids, 0, tf.shape(continuation)[0] - 1)
    continues = tf.logical_and(tf.gather(continuation, safe), ids < tf.shape(continuation)[0])
    starts = tf.logical_and(real, tf.logical_not(continues))  # (batch, pieces)
    word = tf.maximum(tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1, 0)  # (batch, pieces)
    one_hot = tf.one_hot(word, tf.shape(ids)[1]) * tf.cast(real, tf.float32)[..., None]
    # (batch, pieces, words); a row with pieces but no start (a leading ##) has one word
    words = tf.reduce_max(tf.where(real, word + 1, 0), axis=1)  # (batch,)
    return one_hot, words


def merge_pieces_batch(weights, source_ids, target_ids, source_continuation,
                       target_continuation):
    """Piece attention `(batch, target_pieces, source_pieces)` → word attention (TensorFlow).

    One implementation for `translate(return_alignments=True)`,
    `align_texts` and the `translate_alignments` export signature: a source
    word's pieces are summed, a target word's rows averaged.

    Args:
        weights: float `(batch, target_pieces, source_pieces)`.
        source_ids: int `(batch, source_pieces)`, 0 = padding.
        target_ids: int `(batch, target_pieces)`, 0 = padding (the target
            pieces, without `[START]`).
        source_continuation, target_continuation: bool `(vocabulary_size,)`
            from `continuation_table`.

    Returns:
        `(word_weights, source_words, target_words)`: float32
        `(batch, target_pieces, source_pieces)` (rows and columns past the
        numbers of words are 0), int32 `(batch,)` twice.
    """
    weights = tf.cast(weights, tf.float32)
    source_one_hot, source_words = _word_one_hot(source_ids, source_continuation)
    target_one_hot, target_words = _word_one_hot(target_ids, target_continuation)
    by_source = tf.matmul(weights, source_one_hot)  # (batch, target_pieces, source_words)
    summed = tf.matmul(target_one_hot, by_source, transpose_a=True)
    # (batch, target_words, source_words)
    counts = tf.reduce_sum(target_one_hot, axis=1)[..., None]  # (batch, target_words, 1)
    return summed / tf.maximum(counts, 1.0), source_words, target_words


def merge_pieces(weights, source_starts, target_starts):
    """A piece-level attention matrix of one pair as a word-level one (NumPy).

    Args:
        weights: `(target_pieces, source_pieces)`, rows of attention weights.
        source_starts, target_starts: bool `(source_pieces,)`,
            `(target_pieces,)`, from `word_starts`.

    Returns:
        `(target_words, source_words)`: the source pieces of a word summed,
        the target pieces of a word averaged (`merge_pieces_batch` on one row).
    """
    weights = np.asarray(weights, np.float32)
    # pieces as ids: 4 starts a word, 5 continues one
    source_ids = np.where(np.asarray(source_starts, bool), 4, 5)[None]
    target_ids = np.where(np.asarray(target_starts, bool), 4, 5)[None]
    continuation = tf.constant([False] * 5 + [True])
    merged, source_words, target_words = merge_pieces_batch(
        weights[None], source_ids, target_ids, continuation, continuation)
    return merged.numpy()[0, :int(target_words[0]), :int(source_words[0])].astype(np.float64)


LINK_METHODS = ("target", "source", "intersection", "union", "grow-diag-final-and")


def links_from_weights(word_weights, method="target"):
    """`(source_word, target_word)` links read from a word attention matrix.

    The matrix can be read in two directions, as a statistical aligner is
    run in two (eflomal's forward and reverse):

    - `"target"` (the default): each target word j is linked to the source
      word it attended to most, `argmax_i W[j, i]` (one link per target word);
    - `"source"`: each source word i is linked to the target word that
      attended to it most, `argmax_j W[j, i]` (one link per source word);
    - `"intersection"`, `"union"`, `"grow-diag-final-and"`: the two
      directions combined by `symmetrize` (Koehn et al. 2003), as
      statistical aligners' two directions are.

    A tie goes to the first word (NumPy's `argmax`).

    Args:
        word_weights: `(target_words, source_words)`.
        method: one of `LINK_METHODS`.

    Returns:
        A list of `(i, j)` int pairs sorted by target word then source word
        (`"target"`), by source word (`"source"`), or sorted as tuples (the
        symmetrised ones).

    Raises:
        ValueError: an unknown `method`, or `word_weights` not 2-D.
    """
    if method not in LINK_METHODS:
        raise ValueError(f"method must be one of {LINK_METHODS}. Received: method={method!r}")
    word_weights = np.asarray(word_weights)
    if word_weights.ndim != 2:
        raise ValueError("word_weights must be a (target_words, source_words) matrix. "
                         f"Received shape {word_weights.shape}.")
    if word_weights.size == 0:
        return []
    by_target = by_source = None
    if method != "source":
        by_target = [(int(i), j) for j, i in enumerate(np.argmax(word_weights, axis=1))]
    if method != "target":
        by_source = [(i, int(j)) for i, j in enumerate(np.argmax(word_weights, axis=0))]
    if method == "target":
        return by_target
    if method == "source":
        return by_source
    return symmetrize(by_target, by_source, method)


def _check_index_or_mean(name, value, size):
    if isinstance(value, str):
        if value != "mean":
            raise ValueError(f"{name} must be an int or 'mean'. Received: {name}={value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not (
            -size <= value < size):
        raise ValueError(f"{name} must be 'mean' or an int in [{-size}, {size - 1}]. "
                         f"Received: {name}={value!r}")
    return int(value)


def attention_heads(model, source_ids, target_in_ids):
    """Every cross-attention distribution of a teacher-forced pass.

    Args:
        model: a kerasseq model with attention (`TransformerSeq2Seq`, or
            `RNNSeq2Seq` built with an attention).
        source_ids: int `(batch_size, source_length)`, 0 = padding.
        target_in_ids: int `(batch_size, target_length)`, `[START]` first.

    Returns:
        float32 NumPy `(batch_size, num_layers, num_heads, target_length,
        source_length)`; an RNN has one layer and one head.

    Raises:
        ValueError: the model has no attention (an RNN built with
            `attention=None`, an `Ensemble`).
    """
    return np.asarray(attention_heads_tensor(model, np.asarray(source_ids, np.int32),
                                             np.asarray(target_in_ids, np.int32)))


def attention_heads_tensor(model, source_ids, target_in_ids):
    """`attention_heads` as a float32 tensor (works inside a `tf.function`)."""
    if check_alignable(model) == "transformer":
        layers = [tf.cast(model.cross_attention_weights(source_ids, target_in_ids, layer=i),
                          tf.float32) for i in range(len(model.decoder_blocks))]
        return tf.stack(layers, axis=1)  # (batch_size, layers, heads, target, source)
    weights = tf.cast(model.teacher_forced_attention(source_ids, target_in_ids), tf.float32)
    return weights[:, None, None]  # (batch_size, 1, 1, target, source)


def check_alignable(model):
    """`"transformer"` or `"rnn"`: the kind of attention `model` has, or a `ValueError`."""
    if hasattr(model, "decoder_blocks") and hasattr(model, "cross_attention_weights"):
        return "transformer"
    if getattr(model, "attention", None) is not None and hasattr(model, "teacher_forced_attention"):
        return "rnn"
    raise ValueError(
        f"Word alignments need a model with attention; {type(model).__name__} "
        f"{getattr(model, 'name', '')!r} has none (an RNN built with attention=None, or an "
        "Ensemble, whose members attend differently). Align with one attention model.")


def alignment_strings(model, source_ids, target_ids, layer=None, head=None,
                      start_id=START_ID):
    """Word links as `"i-j i-j ..."` strings, all in TensorFlow (for exported signatures).

    Args:
        model: an attention model with tokenizers.
        source_ids: int `(batch, source_length)`, 0 = padding.
        target_ids: int `(batch, target_length)`, the hypotheses' pieces
            without `[START]`, 0 after the last one.
        layer, head: see `select_heads`; `None`: the model's default
            (`default_alignment_head`).

    Returns:
        `tf.string` `(batch,)`: target word j linked to its most attended
        source word i, the Pharaoh text of `to_pharaoh` (`""` for an empty
        hypothesis).
    """
    layer, head = resolve_alignment_head(model, layer, head)
    source_ids = tf.cast(source_ids, tf.int32)
    target_ids = tf.cast(target_ids, tf.int32)
    batch = tf.shape(target_ids)[0]
    target_in = tf.concat([tf.fill([batch, 1], start_id), target_ids[:, :-1]], axis=1)
    heads = attention_heads_tensor(model, source_ids, target_in)
    # (batch, layers, heads, target_length, source_length)
    weights = _select(heads, layer, head, tf.reduce_mean)
    merged, _, target_words = merge_pieces_batch(
        weights, source_ids, target_ids,
        tf.constant(continuation_table(model.source_tokenizer)),
        tf.constant(continuation_table(model.target_tokenizer)))
    best = tf.argmax(merged, axis=-1, output_type=tf.int32)  # (batch, target_length)
    positions = tf.range(tf.shape(best)[1])[None, :]  # (1, target_length)
    links = tf.strings.as_string(best) + "-" + tf.strings.as_string(positions + 0 * best)
    kept = tf.ragged.boolean_mask(links, tf.sequence_mask(target_words, tf.shape(best)[1]))
    return tf.strings.reduce_join(kept, axis=1, separator=" ")  # (batch,)


def select_heads(heads, layer=ALIGNMENT_LAYER, head=ALIGNMENT_HEAD):
    """One `(batch_size, target_length, source_length)` matrix from `attention_heads`' output.

    Args:
        heads: `(batch_size, num_layers, num_heads, target_length, source_length)`.
        layer: int index or `"mean"` (average over layers).
        head: int index or `"mean"` (average over heads).
    """
    return _select(np.asarray(heads), layer, head, np.mean)


def _select(heads, layer, head, mean):
    """`select_heads` for NumPy arrays (`mean=np.mean`) and tensors (`tf.reduce_mean`)."""
    layer = _check_index_or_mean("layer", layer, heads.shape[1])
    head = _check_index_or_mean("head", head, heads.shape[2])
    heads = mean(heads, axis=1) if layer == "mean" else heads[:, layer]
    return mean(heads, axis=1) if head == "mean" else heads[:, head]


def _pad(rows, length=None):
    length = max([len(row) for row in rows] + [1]) if length is None else length
    array = np.zeros([len(rows), length], np.int32)
    for index, row in enumerate(rows):
        array[index, :len(row)] = row
    return array


def align_ids(model, source_ids, target_ids, layer=None, head=None, heads=False, start_id=START_ID,
              aligner=None):
    """Word alignments of id sequences (teacher-forced attention, merged to words).

    Args:
        model: an attention model with `source_tokenizer` / `target_tokenizer`
            (for the word boundaries; without them every id is a word).
        source_ids: list of int sequences (no padding needed).
        target_ids: list of int sequences, the target pieces without
            `[START]` / `[END]`.
        layer, head: see `select_heads` (Transformer only; an RNN has one);
            `None`: the model's default (`default_alignment_head`: the
            guided head of a model trained with guided alignment, else the
            mean over every layer and head).
        heads: bool. Also return every layer's and head's word matrix.
        aligner: optional `kerasseq.alignment.ShiftedAlignmentHead` trained
            on `model`: its attention replaces the model's heads in
            `"weights"` and `"links"` (then `layer` and `head` must be
            `None`; it needs one position more than the target's pieces).

    Returns:
        A list with, per pair, a dict: `"links"` (list of `(source_word,
        target_word)`), `"weights"` (`(target_words, source_words)` NumPy),
        and with `heads=True` `"head_weights"` (`(num_layers, num_heads,
        target_words, source_words)`).
    """
    if len(source_ids) != len(target_ids):
        raise ValueError("source_ids and target_ids must have the same number of rows. "
                         f"Received {len(source_ids)} and {len(target_ids)}.")
    source_rows = [list(np.asarray(row, np.int64).tolist()) for row in source_ids]
    target_rows = [list(np.asarray(row, np.int64).tolist()) for row in target_ids]
    empty = [i for i, row in enumerate(source_rows) if not row]
    if empty:
        raise ValueError(f"source_ids row {empty[0]} is empty: there is nothing to align to.")
    source_ids = _pad(source_rows)
    target_ids = _pad(target_rows)
    # row t of the attention is the one that predicts target piece t, fed piece t - 1
    target_in = _pad([[start_id] + row[:-1] for row in target_rows], target_ids.shape[1])
    if aligner is not None and (layer is not None or head is not None):
        raise ValueError("Give either aligner or layer/head: the aligner's attention replaces "
                         f"the model's heads. Received: layer={layer!r}, head={head!r}.")
    all_heads = None
    if heads or aligner is None:
        all_heads = attention_heads(model, source_ids, target_in)
        # (batch, layers, heads, target_length, source_length)
    source_continuation = tf.constant(continuation_table(getattr(model, "source_tokenizer", None)))
    target_continuation = tf.constant(continuation_table(getattr(model, "target_tokenizer", None)))

    def merge(weights):  # (batch, target, source) -> word matrices and word counts
        merged, source_words, target_words = merge_pieces_batch(
            weights, source_ids, target_ids, source_continuation, target_continuation)
        return merged.numpy(), source_words.numpy(), target_words.numpy()

    if aligner is not None:
        merged, source_words, target_words = merge(
            aligner.piece_attention(model, source_ids, target_ids))
    else:
        layer, head = resolve_alignment_head(model, layer, head)
        merged, source_words, target_words = merge(select_heads(all_heads, layer, head))
    if heads:
        layers, num_heads = all_heads.shape[1:3]
        per_head = [[merge(all_heads[:, l_, h_])[0] for h_ in range(num_heads)]
                    for l_ in range(layers)]
    results = []
    for index in range(len(source_rows)):
        n_target, n_source = int(target_words[index]), int(source_words[index])
        weights = merged[index, :n_target, :n_source].astype(np.float64)
        result = {"links": links_from_weights(weights), "weights": weights}
        if heads:
            result["head_weights"] = np.array([[matrix[index, :n_target, :n_source]
                                                for matrix in row] for row in per_head])
        results.append(result)
    return results


def align_texts(model, sources, targets, layer=None, head=None, heads=False, batch_size=32,
                max_source_length=None, aligner=None):
    """Forced word alignments of text pairs: what the model attends to while reading `targets`.

    Sources follow the `Translator`'s one rule (`Translator.source_limit`,
    docs/design.md): the source tokenizer's `max_length` and
    `max_source_length` cut them, and past that nothing is cut: a
    Transformer refuses a source longer than its position table
    (`trim_source_ids`), as it refuses to translate one. Targets are never
    cut: a target longer than the Transformer's position table is refused
    too (its `PositionalEmbedding`).

    Args:
        model: an attention model built with `source_tokenizer` and
            `target_tokenizer`.
        sources, targets: lists of str of the same length.
        layer, head, heads, aligner: see `align_ids`.
        batch_size: int >= 1, pairs per teacher-forced pass.
        max_source_length: int >= 1 or `None`: source pieces kept per text,
            the `SearchConfig` setting of that name, checked as the
            `Translator` checks it (at most a Transformer's `max_positions`).

    Returns:
        One dict per pair, as `align_ids`. Word indices count words as the
        tokenizers split them (runs of letters and digits, every other mark
        alone): `kerasseq.data.sword.split_words`.

    Raises:
        ValueError: `sources` and `targets` of different lengths, a model
            without tokenizers, a source (after the cuts above) or a target
            longer than the Transformer's position table.
        SearchConfigError: (a `ValueError`) a bad `max_source_length`, or
            one larger than the Transformer's `max_positions`.
    """
    if len(sources) != len(targets):
        raise ValueError(f"sources and targets must have the same length. Received "
                         f"{len(sources)} and {len(targets)}.")
    source_tokenizer = getattr(model, "source_tokenizer", None)
    target_tokenizer = getattr(model, "target_tokenizer", None)
    if source_tokenizer is None or target_tokenizer is None:
        raise ValueError("align_texts needs a model built with source_tokenizer and "
                         "target_tokenizer; use align_ids for token ids.")
    if max_source_length is not None:  # the Translator's checks of the setting
        check_search = contract.optional(model, "check_search_config")
        config = SearchConfig(max_source_length=max_source_length)
        if callable(check_search):
            check_search(config)
    # What the Translator applies after its cut (`Translator._prepare_ids`).
    trim = contract.optional(model, "trim_source_ids")
    results = []
    for start in range(0, len(sources), batch_size):
        source_ids = source_tokenizer.encode(list(sources[start:start + batch_size])).to_list()
        target_ids = target_tokenizer.encode(list(targets[start:start + batch_size])).to_list()
        if max_source_length is not None:
            source_ids = [row[:max_source_length] for row in source_ids]
        if callable(trim) and source_ids:
            trim(_pad(source_ids))  # raises for a source longer than the position table
        results.extend(align_ids(model, source_ids, target_ids, layer=layer, head=head,
                                 heads=heads, aligner=aligner))
    return results
