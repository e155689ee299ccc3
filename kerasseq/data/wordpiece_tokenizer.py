"""`WordPieceTextTokenizer`: subword ids from keras-hub's WordPiece, with kerasseq's reserved ids.

WordPiece: Schuster & Nakajima 2012; Wu et al. 2016 (the GNMT paper).
keras-hub does the work (`keras_hub.tokenizers.compute_word_piece_vocabulary`
in `adapt`, `WordPieceTokenizer` to split and join); the class docstring
says how. It has the interface of `kerasseq.data.TextTokenizer`, so models,
`make_dataset`, `translate`, the CLI and `export_translator` take either.
"""

import types

import keras
import numpy as np
import tensorflow as tf

from kerasseq.data.tokenizer import (
    RESERVED_TOKENS,
    UNK_ID,
    UNK_TOKEN,
    TokenizerBase,
    _to_string_tensor,
    check_flag,
    check_max_tokens,
    check_vocabulary,
)

SUFFIX_INDICATOR = "##"
DEFAULT_MAX_TOKENS = 8000
_ADAPT_BATCH_SIZE = 1024

# How `detokenize` puts punctuation back, applied in this order to the words
# joined by single spaces (WordPiece splits off every punctuation mark, so the
# original spacing is lost; these rules restore the usual one). RE2 syntax.
_NUMBER_SEPARATOR = (r"(\pN) ([.,:]) (\pN)", r"\1\2\3")  # "3 . 5" -> "3.5"
_INSIDE_WORD = (r"([\pL\pN]) ([-'’]) ([\pL\pN])", r"\1\2\3")  # "don ' t" -> "don't"
_PUNCTUATION_RULES = (
    _NUMBER_SEPARATOR,
    _INSIDE_WORD,
    _INSIDE_WORD,  # twice: "a - b - c" overlaps, one pass joins every other mark
    # no space before . , ! ? ; : %, closing brackets and closing quotes ) ] } ” ’ »
    (r" ([.,!?;:%]|\p{Pe}|\p{Pf})", r"\1"),
    # no space after opening brackets and quotes ( [ { “ ‘ « and Spanish ¿ ¡
    (r"(\p{Ps}|\p{Pi}|[¿¡]) ", r"\1"),
    (r"^##(\S)", r"\1"),  # a text that starts with a continuation piece
)


def _keras_hub():
    """keras-hub, imported on first use (it takes about half a second)."""
    import keras_hub

    return keras_hub


@keras.saving.register_keras_serializable(package="kerasseq")
class WordPieceTextTokenizer(TokenizerBase):
    """WordPiece subwords to integer ids and back, with kerasseq's reserved ids.

    Text is cut into words and punctuation marks (every punctuation mark and
    every CJK character is a word of its own; whitespace is dropped), and each
    word into the longest vocabulary pieces, left to right (Wu et al. 2016,
    section 4.1): `"Ablösung"` -> `["ab", "##lös", "##ung"]`. A word that the
    pieces cannot spell becomes a single `[UNK]`. The splitting is
    keras-hub's `WordPieceTokenizer`; its vocabulary is kerasseq's four
    reserved tokens followed by `vocabulary`, so its ids *are* kerasseq ids:

    | id  | token                                   |
    |-----|-----------------------------------------|
    | 0-3 | `[PAD]`, `[UNK]`, `[START]`, `[END]`    |
    | 4-  | `vocabulary[0]`, `vocabulary[1]`, ...   |

    `encode` never adds `[START]` or `[END]` (as `TextTokenizer`). Everything
    runs as TensorFlow ops (TensorFlow Text's `FastWordpieceTokenizer`), so the
    tokenizer works eagerly, inside `tf.data`, inside a `tf.function` and in
    an exported SavedModel, which then needs `import tensorflow_text` before
    loading.

    `detokenize` reads each row up to its first `[END]`, glues every `##`
    piece to the piece before it, joins the words with one space, and puts
    punctuation back where English, German and Spanish put it: no space
    before `. , ! ? ; : %`, closing brackets and closing quotes (`” ’ »`),
    none after opening brackets, opening quotes (`“ ‘ «`) and `¿ ¡`, none
    around `-`, `'` or `’` between two letters or digits, none around `.`,
    `,` or `:` between two digits. `"I don't think so, really."` comes back
    as it was (lower-cased with `lowercase=True`); text spaced otherwise comes
    back with this spacing.

    Args:
        vocabulary: list of str, the pieces without the reserved tokens, in id
            order (the first gets id 4); continuation pieces start with `##`.
            `None` to learn it later with `adapt`. Empty, duplicate, reserved
            and whitespace-holding pieces are errors, and so is an empty list.
        lowercase: bool, default `False`. Case-fold every text (TensorFlow
            Text's `case_fold_utf8`, NFKC case folding: `"Größe"` ->
            `"grösse"`) before it is split, in `adapt` as well as in `encode`.
        strip_accents: bool, default `False`. Remove accents (`"é"` -> `"e"`)
            before splitting, in `adapt` and in `encode`.
        max_length: optional int >= 1. `encode` keeps only the first
            `max_length` pieces of each text.
        **kwargs: passed to `keras.layers.Layer` (`name`, ...).

    Call arguments:
        texts: as in `encode`; calling the layer is `encode(texts)` (see
            `TokenizerBase`).

    Example:

    >>> tokenizer = WordPieceTextTokenizer(["the", "cat", "sat", "s", "##at", "##s"])
    >>> tokenizer.encode(["the cats sat.", "the dog"]).to_list()
    [[4, 5, 9, 6, 1], [4, 1]]
    >>> tokenizer.decode_to_strings([[2, 4, 7, 8, 9, 3, 0]])
    ['the sats']
    """

    def __init__(
        self,
        vocabulary=None,
        lowercase=False,
        strip_accents=False,
        max_length=None,
        **kwargs,
    ):
        super().__init__(lowercase=lowercase, max_length=max_length, **kwargs)
        check_flag("strip_accents", strip_accents)
        self.strip_accents = bool(strip_accents)
        # keras-hub's WordPiece tokenize and detokenize, compiled, are kept out
        # of Keras' tracking: they hold no variable or lookup table (the
        # WordPiece model is a constant), and the config rebuilds them.
        self._compiled = types.SimpleNamespace(tokenize=None, detokenize=None)
        self._init_vocabulary(vocabulary)

    # ------------------------------------------------------------------
    # Vocabulary
    # ------------------------------------------------------------------
    @staticmethod
    def _check_vocabulary(vocabulary):
        """The pieces of `vocabulary` as a list of str, or a `ValueError` naming the problem."""
        pieces = check_vocabulary(vocabulary, "pieces")
        if not pieces:
            raise ValueError(
                "`vocabulary` must hold at least one piece. Received an empty vocabulary; "
                "pass None and call adapt(texts) to learn one."
            )
        bad = [piece for piece in pieces if piece.split() != [piece] or piece == SUFFIX_INDICATOR]
        if bad:
            raise ValueError(
                "`vocabulary` pieces must be non-empty, hold no whitespace and not be the bare "
                f"suffix indicator {SUFFIX_INDICATOR!r}. Received: {bad[:10]!r}"
            )
        return pieces

    def _use_vocabulary(self, pieces):
        word_piece = _keras_hub().tokenizers.WordPieceTokenizer(
            vocabulary=list(RESERVED_TOKENS) + pieces,
            lowercase=self.lowercase,
            strip_accents=self.strip_accents,
            suffix_indicator=SUFFIX_INDICATOR,
            oov_token=UNK_TOKEN,
            dtype="int32",
        )
        # Always the TensorFlow path of keras-hub (eagerly it would run a
        # Python implementation and return lists): one trace per function.
        self._compiled = types.SimpleNamespace(
            tokenize=tf.function(
                word_piece.tokenize, input_signature=[tf.TensorSpec([None], tf.string)],
                autograph=False,
            ),
            detokenize=tf.function(
                word_piece.detokenize,
                input_signature=[tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)],
                autograph=False,
            ),
        )

    def adapt(self, texts, max_tokens=DEFAULT_MAX_TOKENS):
        """Learn the vocabulary from `texts` with keras-hub's `compute_word_piece_vocabulary`.

        The learner (TensorFlow Text's BERT vocabulary learner) counts the
        words of `texts`, after the same case folding, accent stripping and
        splitting as `encode`, and keeps every character that occurs plus the
        most useful longer pieces, up to `max_tokens` ids in all. The same
        texts always give the same vocabulary.

        Args:
            texts: list of str, a `tf.string` tensor, or a `tf.data.Dataset`
                of strings (scalars or batches).
            max_tokens: int > 4, the largest `vocabulary_size`, the four
                reserved ids included (default 8000). The learner may stop
                below it, on a small corpus far below.

        Returns:
            `self`, so calls can be chained.
        """
        check_max_tokens(max_tokens)
        texts = _collect_texts(texts)
        vocabulary = []
        if texts:
            data = tf.data.Dataset.from_tensor_slices(tf.constant(texts, tf.string))
            try:
                vocabulary = _keras_hub().tokenizers.compute_word_piece_vocabulary(
                    data.batch(_ADAPT_BATCH_SIZE),
                    max_tokens,
                    lowercase=self.lowercase,
                    strip_accents=self.strip_accents,
                    suffix_indicator=SUFFIX_INDICATOR,
                    reserved_tokens=list(RESERVED_TOKENS),
                )
            except StopIteration:  # the learner's way of saying it counted no word
                vocabulary = []
        pieces = [piece for piece in vocabulary if piece not in RESERVED_TOKENS]
        if not pieces:
            raise ValueError(
                "adapt() found no piece to put in the vocabulary: `texts` holds no word "
                f"(received {len(texts)} texts)."
            )
        self.set_vocabulary(pieces)
        return self

    @classmethod
    def from_texts(cls, texts, max_tokens=DEFAULT_MAX_TOKENS, **kwargs):
        """A `WordPieceTextTokenizer(**kwargs)` (`lowercase`, `strip_accents`,
        `max_length`, `name`) adapted to `texts` with `max_tokens` (see `adapt`)."""
        return cls(**kwargs).adapt(texts, max_tokens=max_tokens)

    # ------------------------------------------------------------------
    # Text -> ids
    # ------------------------------------------------------------------
    def _encode(self, texts):
        scalar = texts.shape.rank == 0
        ids = self._compiled.tokenize(texts[tf.newaxis] if scalar else texts)  # (batch_size, None)
        return ids[0] if scalar else ids

    def tokenize(self, texts):
        """Text to string pieces (`"Ablösung"` -> `["ab", "##lös", "##ung"]`).

        Words the pieces cannot spell come out as `"[UNK]"`; no truncation.

        Returns:
            `tf.RaggedTensor` of `tf.string`, shape `(batch_size, None)`; a
            dense `(length,)` tensor for a scalar input.
        """
        self._require_vocabulary()
        ids = self._encode(_to_string_tensor(texts))
        vocabulary = tf.constant(self.get_vocabulary(), tf.string)
        return tf.ragged.map_flat_values(tf.gather, vocabulary, ids)

    # ------------------------------------------------------------------
    # Ids -> text
    # ------------------------------------------------------------------
    def _join(self, ids, keep):
        """Pieces glued, words spaced and punctuation put back (class docstring)."""
        known = (ids >= 0) & (ids < self.vocabulary_size)
        ids = tf.cast(tf.where(known, ids, UNK_ID), tf.int32)  # (batch_size, length)
        texts = self._compiled.detokenize(tf.ragged.boolean_mask(ids, keep))  # (batch_size,)
        for pattern, rewrite in _PUNCTUATION_RULES:
            texts = tf.strings.regex_replace(texts, pattern, rewrite)
        return texts

    # ------------------------------------------------------------------
    # Serialization
    # ------------------------------------------------------------------
    def get_config(self):
        config = super().get_config()
        config["strip_accents"] = self.strip_accents
        return config


def _collect_texts(texts):
    """Every text of `texts` (see `adapt`) as a list of str."""
    if isinstance(texts, (tf.data.Dataset, str, bytes, tf.Tensor, np.ndarray)):
        batches = TokenizerBase._iterate_text_batches(texts)
    elif hasattr(texts, "__iter__"):
        batches = [list(texts)]
    else:
        raise ValueError(
            "`texts` must be a list of str, a tf.string tensor or a tf.data.Dataset of "
            f"strings. Received: {type(texts).__name__}"
        )
    collected = []
    for batch in batches:
        for text in batch:
            if isinstance(text, bytes):
                text = text.decode("utf-8")
            if not isinstance(text, str):
                raise ValueError(
                    f"`texts` must contain only str. Received a {type(text).__name__}: "
                    f"{text!r:.100}"
                )
            collected.append(text)
    return collected
