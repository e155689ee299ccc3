"""`Ensemble`: several seq2seq models decoded as one, averaging in probability space.

At every target position each member m gives a next-token distribution
P_m(y_t | y_<t, x); the ensemble decodes with their mean

    P(y_t | y_<t, x) = (1/n) sum_m P_m(y_t | y_<t, x)

(as fairseq's ensemble decoding does). `decode_step` returns
its logarithm, computed stably from the members' log-softmaxes:

    log P = logsumexp_m(log_softmax(logits_m)) - log(n)

These log-probabilities normalise already, so the searches' own
`log_softmax` leaves them as they are (up to rounding): greedy search, beam
search (with its length and coverage penalties) and sampling run on the
ensemble unchanged, and so do `translate`, the CLI and `export_translator`.

The state of the ensemble is one flat dict: member i's state tensors under
`member_{i}/<key>`, plus `source_mask` and (when every member reports
attention) `attention_weights`, the members' mean, for the coverage penalty.
"""

import math

import keras
from keras import ops

from kerasseq._validation import is_int
from kerasseq.decoding.contract import ATTENTION_WEIGHTS, SOURCE_MASK, encode_for_search
from kerasseq.models.base import Seq2SeqModel

MEMBER_PREFIX = "member_{}/"

# Tokenizer settings that do not change which id a text maps to.
_TOKENIZER_IGNORED = ("name", "trainable", "dtype", "max_length")


@keras.saving.register_keras_serializable(package="kerasseq")
class Ensemble(Seq2SeqModel):
    """Decode several models as one: the mean of their next-token distributions.

    Averaging in probability space (not of the logits): at step t,

        log P(y_t | y_<t, x) = log( (1/n) sum_m softmax(z_m)_{y_t} )
                             = logsumexp_m(log_softmax(z_m)) - log(n)

    with z_m the logits of member m (a mean of probabilities: one member
    cannot veto a token the others like, as it could in a mean of
    log-probabilities). Each member runs its own encoder and
    keeps its own decoding state, so members may differ in architecture (an
    RNN and a Transformer, say); they must read and write the same
    vocabularies.

    The ensemble meets the decoding contract (`kerasseq.decoding.Seq2SeqDecodable`):

    - `encode(source_ids)` returns member i's state under `member_{i}/<key>`,
      plus `source_mask` `(batch_size, source_length)` and, when every member
      reports one, `attention_weights` `(batch_size, source_length)` (their
      mean, for beam search's coverage penalty);
    - `decode_step(token_ids, state, step)` runs every member's step and
      returns the ensemble log-probabilities `(batch_size, target_vocab_size)`
      as its logits;
    - `shared_state_keys` lists the members' shared keys (prefixed) and
      `source_mask`, so beam search keeps one copy of the source memory.

    Tokenizers, `start_id` / `end_id` and vocabulary sizes are those of the
    first member; `max_target_length` and `max_positions` (a position table)
    are the smallest of the members'. The training call
    `[source_ids, target_in_ids] → log-probabilities` teacher-forces every
    member and averages the same way, so it equals `decode_step` at every
    position. An ensemble is for inference: train the members, not it.

    It saves as a `.keras` file like any kerasseq model (the members inside).

    Checkpoint averaging (`kerasseq.training.average_checkpoints`) is the
    cheaper cousin: one model whose *weights* are the mean of several
    checkpoints of one run, decoded at the cost of one model.

    Args:
        members: a non-empty list of models meeting the decoding contract
            (kerasseq `Seq2SeqModel`s), with the same target vocabulary
            (size, tokenizer vocabulary, start and end ids) and the same
            source vocabulary.
        **kwargs: `name` and other `keras.Model` arguments.

    Raises:
        TypeError: `members` is not a non-empty list of decodable models.
        ValueError: the members' vocabularies or special ids differ (the
            message names the member and what differs).

    Example:

    >>> ensemble = Ensemble([model_a, model_b])      # doctest: +SKIP
    >>> ensemble.translate(["hello"], num_beams=8)   # doctest: +SKIP
    ['HH AH L OW']
    """

    def __init__(self, members, **kwargs):
        if isinstance(members, (list, tuple)):
            members = [keras.saving.deserialize_keras_object(m) if isinstance(m, dict) else m
                       for m in members]
        check_members(members)
        kwargs.setdefault("name", "ensemble")
        source_ids, target_in_ids = self._training_inputs()
        # One layer runs the members, so members may share a name (two
        # `model.keras` files of the same recipe), which a functional graph forbids.
        log_probs = MemberAverage(members, name="member_average")(source_ids, target_in_ids)
        # (batch_size, target_length, target_vocab_size)
        super().__init__(inputs=[source_ids, target_in_ids], outputs=log_probs, **kwargs)
        self.members = list(members)

    # ------------------------------------------------------------ metadata
    @property
    def source_tokenizer(self):
        return getattr(self.members[0], "source_tokenizer", None)

    @property
    def target_tokenizer(self):
        return getattr(self.members[0], "target_tokenizer", None)

    @property
    def start_id(self):
        return int(getattr(self.members[0], "start_id", 2))

    @property
    def end_id(self):
        return int(getattr(self.members[0], "end_id", 3))

    @property
    def source_vocab_size(self):
        return _first_attribute(self.members, "source_vocab_size")

    @property
    def target_vocab_size(self):
        return _first_attribute(self.members, "target_vocab_size")

    @property
    def max_target_length(self):
        """The smallest `max_target_length` of the members (None if none has one)."""
        return _smallest_int(self.members, "max_target_length")

    @property
    def max_positions(self):
        """The smallest position table (`max_positions`) of the members, or None."""
        return _smallest_int(self.members, "max_positions")

    @property
    def source_length_multiple(self):
        """Columns of a source batch are padded to a multiple of every member's."""
        return math.lcm(*(int(getattr(member, "source_length_multiple", 8) or 1)
                          for member in self.members))

    @property
    def shared_state_keys(self):
        """The members' shared state keys (prefixed) and the ensemble's `source_mask`."""
        keys = [SOURCE_MASK]
        for index, member in enumerate(self.members):
            prefix = MEMBER_PREFIX.format(index)
            keys.extend(prefix + key for key in getattr(member, "shared_state_keys", ()))
        return tuple(keys)

    def check_search_config(self, config):
        """Every member's own checks of a `kerasseq.SearchConfig`."""
        for member in self.members:
            check = getattr(member, "check_search_config", None)
            if callable(check):
                check(config)

    def trim_source_ids(self, source_ids):
        """Every member's source trimming in turn (the shortest position table wins)."""
        for member in self.members:
            trim = getattr(member, "trim_source_ids", None)
            if callable(trim):
                source_ids = trim(source_ids)
        return source_ids

    # ------------------------------------------------------------ contract
    def encode(self, source_ids, max_length=None):
        """Every member's state, prefixed; `max_length` reaches the members that take it."""
        source_ids = self.trim_source_ids(ops.cast(source_ids, "int32"))
        # (batch_size, source_length): the same columns for every member
        state = {SOURCE_MASK: ops.not_equal(source_ids, 0)}  # (batch_size, source_length)
        attention = []
        for index, member in enumerate(self.members):
            member_state = encode_for_search(member, source_ids, max_length)
            state.update(_prefixed(member_state, index))
            attention.append(member_state.get(ATTENTION_WEIGHTS))
        if all(weights is not None for weights in attention):
            state[ATTENTION_WEIGHTS] = _mean_attention(attention)  # (batch_size, source_length)
        return state

    def decode_step(self, token_ids, state, step):
        new_state = dict(state)
        log_probs, attention = [], []
        for index, member in enumerate(self.members):
            prefix = MEMBER_PREFIX.format(index)
            member_state = {key[len(prefix):]: value for key, value in state.items()
                            if key.startswith(prefix)}
            logits, member_state = member.decode_step(token_ids, member_state, step)
            # logits (batch_size, target_vocab_size)
            log_probs.append(ops.log_softmax(ops.cast(logits, "float32"), axis=-1))
            new_state.update(_prefixed(member_state, index))  # same tensors where unchanged
            attention.append(member_state.get(ATTENTION_WEIGHTS))
        if ATTENTION_WEIGHTS in state:
            new_state[ATTENTION_WEIGHTS] = _mean_attention(attention)  # (batch_size, source_length)
        return average_log_probs(log_probs), new_state

    # ------------------------------------------------------------ serialization
    def get_config(self):  # `from_config` is Seq2SeqModel's
        return {"name": self.name,
                "members": [keras.saving.serialize_keras_object(m) for m in self.members]}


class MemberAverage(keras.layers.Layer):
    """The teacher-forced ensemble: every member's logits, averaged in probability space.

    Call arguments:
        source_ids: int `(batch_size, source_length)`.
        target_in_ids: int `(batch_size, target_length)`.

    Returns:
        float32 log-probabilities `(batch_size, target_length, target_vocab_size)`.
    """

    def __init__(self, members, **kwargs):
        super().__init__(dtype="float32", **kwargs)
        self.members = list(members)
        self.built = True

    def call(self, source_ids, target_in_ids, training=None):
        return average_log_probs([
            ops.log_softmax(ops.cast(member([source_ids, target_in_ids], training=training),
                                     "float32"), axis=-1)
            for member in self.members
        ])

    def compute_output_shape(self, source_ids_shape, target_in_ids_shape):
        vocab_size = getattr(self.members[0], "target_vocab_size", None)
        return tuple(target_in_ids_shape) + (vocab_size,)


def average_log_probs(log_probs):
    """Log of the mean of the distributions: `logsumexp_m(log_probs_m) - log(n)`.

    Args:
        log_probs: a list of n float tensors of one shape `(..., vocab_size)`,
            each a log-distribution over the last axis.

    Returns:
        float32 `(..., vocab_size)`; `exp` of it sums to 1 over the last axis.
    """
    stacked = ops.stack(log_probs, axis=0)  # (n, ..., vocab_size)
    return ops.logsumexp(stacked, axis=0) - math.log(len(log_probs))


def check_members(members):
    """Raise unless `members` can be decoded as one ensemble.

    Raises:
        TypeError: `members` is not a non-empty list or tuple of objects with
            `encode` and `decode_step`.
        ValueError: target (or source) vocabularies or special ids differ.
    """
    if not isinstance(members, (list, tuple)) or not members:
        received = "an empty list" if isinstance(members, (list, tuple)) else (
            f"members of type {type(members).__name__}")
        raise TypeError(f"members must be a non-empty list of kerasseq models. Received: {received}")
    for index, member in enumerate(members):
        missing = [name for name in ("encode", "decode_step")
                   if not callable(getattr(member, name, None))]
        if missing or not isinstance(member, keras.Model):
            what = f"without {missing[0]}()" if missing else "that is not a keras.Model"
            raise TypeError(
                "Every ensemble member must be a Keras seq2seq model that follows the "
                "kerasseq decoding contract (encode and decode_step), e.g. from "
                f"build_rnn_seq2seq. Received: members[{index}] of type "
                f"{type(member).__name__} {what}"
            )
    first = members[0]
    for index, member in enumerate(members[1:], start=1):
        for attribute, default in (("target_vocab_size", None), ("start_id", 2), ("end_id", 3),
                                   ("source_vocab_size", None)):
            ours, theirs = getattr(first, attribute, default), getattr(member, attribute, default)
            if ours is not None and theirs is not None and ours != theirs:
                side = "source" if attribute.startswith("source") else "target"
                raise ValueError(
                    f"Ensemble members must share one {side} vocabulary: members[0] has "
                    f"{attribute}={ours}, members[{index}] has {attribute}={theirs}"
                )
        for side in ("target", "source"):
            difference = _tokenizer_difference(getattr(first, f"{side}_tokenizer", None),
                                               getattr(member, f"{side}_tokenizer", None))
            if difference:
                raise ValueError(
                    f"Ensemble members must share one {side} vocabulary: the {side} "
                    f"tokenizers of members[0] and members[{index}] differ in {difference}"
                )


def _tokenizer_difference(first, other):
    """What differs between two tokenizers' id mappings (a phrase), or None."""
    if first is None or other is None:
        return None
    if type(first) is not type(other):
        return f"type ({type(first).__name__} vs {type(other).__name__})"
    if hasattr(first, "get_vocabulary"):
        ours, theirs = list(first.get_vocabulary()), list(other.get_vocabulary())
        if ours != theirs:
            position = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
                            min(len(ours), len(theirs)))
            return (f"their vocabulary ({len(ours)} vs {len(theirs)} tokens; first difference "
                    f"at id {position})")
    if hasattr(first, "get_config"):
        ours, theirs = first.get_config(), other.get_config()
        for key in sorted(set(ours) | set(theirs)):
            if key not in _TOKENIZER_IGNORED and ours.get(key) != theirs.get(key):
                return f"{key} ({ours.get(key)!r} vs {theirs.get(key)!r})"
    return None


def _prefixed(state, index):
    prefix = MEMBER_PREFIX.format(index)
    return {prefix + key: value for key, value in state.items()}


def _mean_attention(weights):
    """Mean of the members' attention weights, float32 `(batch_size, source_length)`."""
    return ops.mean(ops.stack([ops.cast(w, "float32") for w in weights], axis=0), axis=0)


def _first_attribute(members, name):
    return next((v for v in (getattr(m, name, None) for m in members) if v is not None), None)


def _smallest_int(members, name):
    values = [int(v) for v in (getattr(member, name, None) for member in members) if is_int(v)]
    return min(values) if values else None
