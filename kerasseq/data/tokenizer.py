"""`TextTokenizer`: strings to integer ids and back, built on `keras.layers.StringLookup`.

Every kerasseq tokenizer reserves the same four ids, so models, decoders and the
SavedModel export can rely on them without looking at the vocabulary:

| id | token     | meaning                                             |
|----|-----------|-----------------------------------------------------|
| 0  | `[PAD]`   | padding (the `mask_token` of `StringLookup`)        |
| 1  | `[UNK]`   | any token that is not in the vocabulary (OOV)       |
| 2  | `[START]` | first decoder input (teacher forcing, decoding)     |
| 3  | `[END]`   | the model emits it to stop; decoding stops there    |

The learned vocabulary starts at id 4.
"""

import collections

import keras
import numpy as np
import tensorflow as tf

from kerasseq._validation import check_positive_int

PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
START_TOKEN = "[START]"
END_TOKEN = "[END]"
RESERVED_TOKENS = (PAD_TOKEN, UNK_TOKEN, START_TOKEN, END_TOKEN)

PAD_ID = 0
UNK_ID = 1
START_ID = 2
END_ID = 3

SPLITS = ("character", "whitespace", "word")

# Every character that is not a letter, a digit, a combining mark (needed for
# scripts such as Bengali) or whitespace becomes a token of its own.
_PUNCTUATION_PATTERN = r"([^\pL\pN\pM\s])"

_ADAPT_BATCH_SIZE = 4096


def _to_string_tensor(texts, argument="texts"):
    """Convert a Python str, a list of str, a numpy array or a `tf.string`
    tensor to a `tf.string` tensor of shape `()` or `(batch_size,)`."""
    if isinstance(texts, (tf.Tensor, tf.RaggedTensor)):
        tensor = texts
    elif isinstance(texts, (str, bytes)):
        tensor = tf.constant(texts, dtype=tf.string)
    elif isinstance(texts, (list, tuple)) and len(texts) == 0:
        tensor = tf.constant([], dtype=tf.string)
    else:
        try:
            tensor = tf.convert_to_tensor(texts)
        except (ValueError, TypeError) as error:
            raise ValueError(
                f"`{argument}` must be a str, a list of str or a tf.string tensor. "
                f"Received: {argument}={texts!r:.200}"
            ) from error
    if tensor.dtype != tf.string:
        raise ValueError(
            f"`{argument}` must contain strings. Received a tensor of dtype "
            f"{tensor.dtype.name} and shape {tensor.shape}."
        )
    if tensor.shape.rank == 2 and tensor.shape[-1] == 1:
        tensor = tf.squeeze(tensor, axis=-1)  # (batch_size, 1) -> (batch_size,)
    if tensor.shape.rank not in (0, 1):
        raise ValueError(
            f"`{argument}` must be a scalar string or a 1-D batch of strings. "
            f"Received shape {tensor.shape}."
        )
    return tensor


class TokenizerBase(keras.layers.Layer):
    """What every kerasseq tokenizer shares: reserved ids, vocabulary access, ids to text.

    Subclasses (`TextTokenizer`, `WordPieceTextTokenizer`) end their
    constructor with `_init_vocabulary(vocabulary)` and implement the steps
    this class's methods leave to them: `_use_vocabulary` (for
    `set_vocabulary`), `_encode` (for `encode`), `_join` (for `detokenize`),
    and `tokenize`, `adapt`, `from_texts` and `get_config` (on top of this
    class's, which saves `vocabulary`, `lowercase` and `max_length`). The
    base adds no config key and is not registered, so `.keras` files and
    configs written before it existed load unchanged.

    Calling the layer is `encode(texts)`: same arguments, same result. The
    class attributes `pad_id`, `unk_id`, `start_id`, `end_id` are the
    reserved ids 0-3 of the module docstring.

    Args:
        lowercase: bool, lower-case (or case-fold) text before splitting.
        max_length: optional int >= 1, `encode` keeps the first `max_length`
            tokens.
        **kwargs: passed to `keras.layers.Layer`.
    """

    pad_id, unk_id, start_id, end_id = PAD_ID, UNK_ID, START_ID, END_ID

    def __init__(self, lowercase=False, max_length=None, **kwargs):
        super().__init__(**kwargs)
        check_flag("lowercase", lowercase)
        if max_length is not None and (
            isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1
        ):
            raise ValueError(
                f"`max_length` must be None or an int >= 1. Received: max_length={max_length!r}"
            )
        self.lowercase = bool(lowercase)
        self.max_length = max_length
        self._vocabulary = None  # tuple of str; a tuple so Keras does not track it

    # ------------------------------------------------------------------
    # Vocabulary
    # ------------------------------------------------------------------
    def _init_vocabulary(self, vocabulary):
        """The last step of a subclass's constructor: the vocabulary, if given."""
        if vocabulary is not None:
            self.set_vocabulary(vocabulary)
        self.built = True

    def set_vocabulary(self, vocabulary):
        """Replace the vocabulary (tokens without the reserved ones, in id order).

        Args:
            vocabulary: list of str, checked as the class docstring says. The
                first token gets id 4.
        """
        tokens = self._check_vocabulary(vocabulary)
        self._use_vocabulary(tokens)
        self._vocabulary = tuple(tokens)

    @staticmethod
    def _check_vocabulary(vocabulary):
        return check_vocabulary(vocabulary)

    def _use_vocabulary(self, tokens):
        """Build the lookups of `tokens` (checked, without the reserved ones)."""
        raise NotImplementedError

    def _require_vocabulary(self):
        if self._vocabulary is None:
            kind = type(self).__name__
            raise ValueError(
                f"{kind} {self.name!r} has no vocabulary yet. Pass "
                "`vocabulary=[...]` to the constructor, call `adapt(texts)`, or use "
                f"`{kind}.from_texts(texts)`."
            )

    def get_vocabulary(self):
        """All tokens in id order, reserved ones included.

        Returns:
            list of str; `get_vocabulary()[i]` is the token of id `i`.
        """
        self._require_vocabulary()
        return list(RESERVED_TOKENS) + list(self._vocabulary)

    @property
    def vocabulary(self):
        """The tokens without the reserved ones, in id order (id 4 first), or
        `None` before `adapt`."""
        return None if self._vocabulary is None else list(self._vocabulary)

    @property
    def vocabulary_size(self):
        """Number of ids, reserved ones included (the embedding `input_dim`)."""
        self._require_vocabulary()
        return len(RESERVED_TOKENS) + len(self._vocabulary)

    @staticmethod
    def _iterate_text_batches(texts):
        if isinstance(texts, tf.data.Dataset):
            for batch in texts.as_numpy_iterator():
                yield np.reshape(np.asarray(batch, dtype=object), [-1]).tolist()
            return
        if isinstance(texts, (str, bytes)):
            yield [texts]
            return
        if isinstance(texts, (tf.Tensor, np.ndarray)):
            texts = np.reshape(np.asarray(texts, dtype=object), [-1]).tolist()
        texts = list(texts)
        for start in range(0, len(texts), _ADAPT_BATCH_SIZE):
            yield texts[start : start + _ADAPT_BATCH_SIZE]

    # ------------------------------------------------------------------
    # Text -> ids
    # ------------------------------------------------------------------
    def encode(self, texts):
        """Text to ids, without `[START]`/`[END]`, cut to `max_length`.

        Tokens not in the vocabulary become `UNK_ID` (1). With
        `lowercase=True` the text is lower-cased (case-folded) first, also
        when `encode` is traced in a `tf.function` on a `tf.string` tensor.

        Args:
            texts: a str, a list of str, or a `tf.string` tensor of shape `()`
                or `(batch_size,)`.

        Returns:
            `tf.RaggedTensor` of int32, shape `(batch_size, None)`; a dense
            int32 tensor of shape `(length,)` for a scalar input.
        """
        self._require_vocabulary()
        ids = self._encode(_to_string_tensor(texts))
        return ids if self.max_length is None else ids[..., : self.max_length]

    def _encode(self, texts):
        """`tf.string` `()` or `(batch_size,)` → all the ids, as `encode` returns them."""
        raise NotImplementedError

    # ------------------------------------------------------------------
    # Keras layer
    # ------------------------------------------------------------------
    def __call__(self, texts, **kwargs):
        # Keras only accepts tensors as positional inputs: turn str / list of
        # str into a tf.string tensor first (symbolic inputs pass through).
        if not isinstance(texts, keras.KerasTensor):
            texts = _to_string_tensor(texts)
        return super().__call__(texts, **kwargs)

    def call(self, texts):
        return self.encode(texts)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:1]) + (None,)

    # ------------------------------------------------------------------
    # Ids -> text
    # ------------------------------------------------------------------
    def detokenize(self, ids):
        """Ids back to text.

        Each row is read up to its first `END_ID` (excluded); `PAD_ID` and
        `START_ID` are dropped; `UNK_ID` and unknown ids become `"[UNK]"`.
        The tokens are joined as the class docstring says.

        Args:
            ids: integer ids, dense or ragged, shape `(batch_size, length)` or
                `(length,)`.

        Returns:
            `tf.string` tensor of shape `(batch_size,)`, or a scalar for a 1-D
            input.
        """
        self._require_vocabulary()
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD_ID)
        ids = tf.convert_to_tensor(ids)
        if not ids.dtype.is_integer:
            raise ValueError(f"`ids` must be integers. Received dtype {ids.dtype.name}.")
        scalar = ids.shape.rank == 1
        if scalar:
            ids = ids[tf.newaxis, :]  # (1, length)
        ids = tf.cast(ids, tf.int64)  # (batch_size, length)
        # The ids to print: before the first END, not PAD or START.
        ends_seen = tf.cumsum(tf.cast(tf.equal(ids, END_ID), tf.int32), axis=1)
        keep = tf.equal(ends_seen, 0) & tf.not_equal(ids, PAD_ID) & tf.not_equal(ids, START_ID)
        texts = self._join(ids, keep)  # (batch_size,)
        return texts[0] if scalar else texts

    def _join(self, ids, keep):
        """int64 ids `(batch_size, length)` and the bool `keep` of the same
        shape → the text of each row's kept ids, `tf.string` `(batch_size,)`."""
        raise NotImplementedError

    def decode_to_strings(self, ids):
        """Python convenience: `detokenize` then decode to a list of `str`.

        Args:
            ids: integer ids, dense or ragged, shape `(batch_size, length)`
                (lists of lists of different lengths are fine).

        Returns:
            list of str, one per row.
        """
        if isinstance(ids, (list, tuple)):
            ids = tf.ragged.constant(ids, dtype=tf.int64) if ids else tf.zeros([0, 0], tf.int64)
        texts = np.reshape(self.detokenize(ids).numpy(), [-1])
        return [text.decode("utf-8") for text in texts]

    # ------------------------------------------------------------------
    # Serialization
    # ------------------------------------------------------------------
    def get_config(self):
        config = super().get_config()
        config.update({"vocabulary": self.vocabulary, "lowercase": self.lowercase,
                       "max_length": self.max_length})
        return config


def check_vocabulary(vocabulary, unit="tokens"):
    """The tokens of `vocabulary` (bytes decoded) as a list of str.

    The checks every kerasseq tokenizer makes: a list of str, none of them
    reserved, empty or repeated.

    Raises:
        ValueError: naming the problem.
    """
    if isinstance(vocabulary, (str, bytes)) or not hasattr(vocabulary, "__iter__"):
        raise ValueError(
            f"`vocabulary` must be a list of str. Received: vocabulary={vocabulary!r:.200}"
        )
    tokens = [token.decode("utf-8") if isinstance(token, bytes) else token
              for token in vocabulary]
    wrong = [token for token in tokens if not isinstance(token, str)]
    if wrong:
        raise ValueError(
            f"`vocabulary` must contain only str. Received {type(wrong[0]).__name__} "
            f"values such as {wrong[0]!r:.100}."
        )
    reserved = sorted(set(tokens) & set(RESERVED_TOKENS))
    if reserved:
        raise ValueError(
            f"`vocabulary` must not contain the reserved tokens {list(RESERVED_TOKENS)} "
            f"(they always get ids 0-3). Received vocabulary containing {reserved}."
        )
    if "" in tokens:
        raise ValueError("`vocabulary` must not contain the empty string: every one of its "
                         f"{unit} is non-empty.")
    duplicates = sorted(t for t, count in collections.Counter(tokens).items() if count > 1)
    if duplicates:
        raise ValueError(f"`vocabulary` contains duplicate {unit}: {duplicates[:20]!r}.")
    return tokens


def check_flag(name, value):
    """Raise unless `value` is a bool (NumPy's included)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"`{name}` must be True or False. Received: {name}={value!r}")


def check_max_tokens(max_tokens, optional=False):
    """Raise unless `max_tokens` is an int > 4 (or `None`, when `optional`)."""
    if optional and max_tokens is None:
        return
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= len(
        RESERVED_TOKENS
    ):
        raise ValueError(
            f"`max_tokens` must be {'None or ' if optional else ''}an int > 4 (it counts the "
            f"4 reserved ids). Received: max_tokens={max_tokens!r}"
        )


@keras.saving.register_keras_serializable(package="kerasseq")
class TextTokenizer(TokenizerBase):
    """Split text into tokens and map them to integer ids (and back).

    The lookups are two `keras.layers.StringLookup` layers (token -> id and
    id -> token), so the tokenizer runs inside `tf.data`, inside a
    `tf.function` and inside an exported SavedModel.

    Ids 0-3 are reserved (`[PAD]`, `[UNK]`, `[START]`, `[END]`, see the module
    docstring); the vocabulary tokens follow from id 4, in the order given.
    `encode` never adds `[START]` or `[END]`: the dataset code does that
    (teacher forcing) and the decoders do it when generating.

    Splitting modes (`split`):

    - `"character"`: one token per Unicode character (UTF-8,
      `tf.strings.unicode_split`), so German or Bengali text works. A space is
      an ordinary character: it is kept as the token `" "`, so
      `detokenize(encode(text)) == text` for in-vocabulary text.
    - `"whitespace"`: tokens are separated by runs of whitespace
      (`tf.strings.split`). Use it for phoneme sequences such as
      `"HH AH0 L OW"`. Leading, trailing and repeated whitespace is dropped.
    - `"word"`: every punctuation character (anything that is not a letter,
      digit, combining mark or whitespace) becomes its own token, then the text
      is split on whitespace: `"Go, now!"` -> `["Go", ",", "now", "!"]`.
      `detokenize` joins with single spaces (`"Go , now !"`).

    Args:
        vocabulary: list of str, the tokens without the reserved ones, in id
            order (first token gets id 4). `None` to build it later with
            `adapt`. Duplicates, empty strings and reserved tokens are errors.
        split: `"character"`, `"whitespace"` or `"word"`.
        lowercase: bool, default `False`. Lower-case every text before it
            is split (`tf.strings.lower(texts, encoding="utf-8")`:
            `"ÉCOLE"` -> `"école"`), wherever it is split (`tokenize`, so
            `encode` and `adapt` too); `detokenize` does not restore the
            case. A config without the key loads with `False`.
        max_length: optional int >= 1. `encode` keeps only the first
            `max_length` tokens of each text (the end is cut off).
        **kwargs: passed to `keras.layers.Layer` (`name`, ...).

    Call arguments:
        texts: as in `encode`; calling the layer is `encode(texts)` (see
            `TokenizerBase`).

    Example:

    >>> tokenizer = TextTokenizer.from_texts(["hello", "help"])
    >>> tokenizer.get_vocabulary()
    ['[PAD]', '[UNK]', '[START]', '[END]', 'l', 'e', 'h', 'o', 'p']
    >>> tokenizer.encode(["help", "hex"]).to_list()
    [[6, 5, 4, 8], [6, 5, 1]]
    >>> tokenizer.decode_to_strings([[6, 5, 4, 8, 3, 0], [6, 5, 1, 0, 0, 0]])
    ['help', 'he[UNK]']
    """

    def __init__(
        self,
        vocabulary=None,
        split="character",
        lowercase=False,
        max_length=None,
        **kwargs,
    ):
        super().__init__(lowercase=lowercase, max_length=max_length, **kwargs)
        if split not in SPLITS:
            raise ValueError(
                f"`split` must be one of {', '.join(repr(s) for s in SPLITS)}. "
                f"Received: split={split!r}"
            )
        self.split = split
        lookup = dict(vocabulary=[START_TOKEN, END_TOKEN], mask_token=PAD_TOKEN,
                      oov_token=UNK_TOKEN, num_oov_indices=1)
        self._token_to_id = keras.layers.StringLookup(**lookup, name="token_to_id")
        self._id_to_token = keras.layers.StringLookup(**lookup, invert=True, name="id_to_token")
        self._init_vocabulary(vocabulary)

    # ------------------------------------------------------------------
    # Vocabulary
    # ------------------------------------------------------------------
    def _use_vocabulary(self, tokens):
        full = [START_TOKEN, END_TOKEN] + tokens
        self._token_to_id.set_vocabulary(full)
        self._id_to_token.set_vocabulary(full)

    def adapt(self, texts, min_count=1, max_tokens=None):
        """Build the vocabulary from `texts`.

        The vocabulary is deterministic: tokens sorted by decreasing count, ties
        broken by the token string (Python `str` order, i.e. by code point).
        `max_length` is ignored while counting. With `lowercase=True` the
        texts are lower-cased before they are split and counted.

        Args:
            texts: list of str, a `tf.string` tensor, or a `tf.data.Dataset`
                of strings (scalars or batches).
            min_count: int >= 1. Tokens seen fewer times are left out (they
                will be encoded as `[UNK]`).
            max_tokens: optional int > 4, the largest allowed
                `vocabulary_size`, *including* the four reserved ids. The most
                frequent tokens are kept.

        Returns:
            `self`, so calls can be chained.
        """
        check_positive_int("min_count", min_count)
        check_max_tokens(max_tokens, optional=True)
        counts = collections.Counter()
        for batch in self._iterate_text_batches(texts):
            tokens = self.tokenize(batch)
            flat = tokens.flat_values if isinstance(tokens, tf.RaggedTensor) else tokens
            unique, _, batch_counts = tf.unique_with_counts(tf.reshape(flat, [-1]))
            for token, count in zip(unique.numpy(), batch_counts.numpy(), strict=True):
                counts[token.decode("utf-8")] += int(count)
        for token in RESERVED_TOKENS:
            counts.pop(token, None)
        ranked = sorted(
            (token for token, count in counts.items() if count >= min_count),
            key=lambda token: (-counts[token], token),
        )
        if max_tokens is not None:
            ranked = ranked[: max_tokens - len(RESERVED_TOKENS)]
        if not ranked:
            raise ValueError(
                "adapt() found no token to put in the vocabulary (empty `texts`, or "
                f"every token seen fewer than min_count={min_count} times)."
            )
        self.set_vocabulary(ranked)
        return self

    @classmethod
    def from_texts(cls, texts, min_count=1, max_tokens=None, **kwargs):
        """A `TextTokenizer(**kwargs)` (`split`, `lowercase`, ...) adapted to
        `texts` with `min_count` and `max_tokens` (see `adapt`).

        Example:

        >>> TextTokenizer.from_texts(["HH AH L OW"], split="whitespace").vocabulary
        ['AH', 'HH', 'L', 'OW']
        """
        return cls(**kwargs).adapt(texts, min_count=min_count, max_tokens=max_tokens)

    @property
    def separator(self):
        """The string `detokenize` puts between tokens (`""` or `" "`)."""
        return "" if self.split == "character" else " "

    # ------------------------------------------------------------------
    # Text -> tokens -> ids
    # ------------------------------------------------------------------
    def tokenize(self, texts):
        """Split text into string tokens (no lookup, no truncation).

        With `lowercase=True` the text is lower-cased (UTF-8 aware) first.
        Only TensorFlow ops are used, so this runs inside a `tf.function`.

        Args:
            texts: a str, a list of str, or a `tf.string` tensor of shape `()`
                or `(batch_size,)`.

        Returns:
            `tf.RaggedTensor` of `tf.string`, shape `(batch_size, None)`; a
            dense `(length,)` tensor for a scalar input.
        """
        texts = _to_string_tensor(texts)
        if self.lowercase:
            texts = tf.strings.lower(texts, encoding="utf-8")
        if self.split == "character":
            return tf.strings.unicode_split(texts, "UTF-8")
        if self.split == "word":
            texts = tf.strings.regex_replace(texts, _PUNCTUATION_PATTERN, r" \1 ")
        return tf.strings.split(texts)

    def _encode(self, texts):
        tokens = self.tokenize(texts)
        if isinstance(tokens, tf.RaggedTensor):
            ids = tf.ragged.map_flat_values(self._token_to_id, tokens)
            return tf.ragged.map_flat_values(tf.cast, ids, tf.int32)
        return tf.cast(self._token_to_id(tokens), tf.int32)

    # ------------------------------------------------------------------
    # Ids -> text
    # ------------------------------------------------------------------
    def _join(self, ids, keep):
        tokens = self._id_to_token(ids)  # (batch_size, length)
        kept = tf.ragged.boolean_mask(tokens, keep)  # (batch_size, None)
        return tf.strings.reduce_join(kept, axis=1, separator=self.separator)

    # ------------------------------------------------------------------
    # Serialization
    # ------------------------------------------------------------------
    def get_config(self):
        config = super().get_config()
        config["split"] = self.split
        return config
