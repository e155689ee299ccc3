"""What every kerasseq model shares: the decoding contract and `translate`.

A kerasseq model is a functional `keras.Model` `(source_ids, target_in_ids) →
logits` trained with teacher forcing. Besides that training graph it exposes
the inference contract of docs/design.md, built from the same layers and weights:

* `encode(source_ids) -> state`: a flat dict of tensors, batch axis first;
* `decode_step(token_ids, state, step) -> (logits, state)`: one position.

`kerasseq.decoding` drives any model through these two methods only, and
text reaches it by one path, `kerasseq.Translator`: `translate` and
`generate` below go through it (this module imports the translator, never a
search of `kerasseq.decoding`).
"""

import inspect
import numbers
import weakref

import keras
import tensorflow as tf

from kerasseq.data.tokenizer import END_ID, START_ID
from kerasseq.training import distribute
from kerasseq.translation import as_texts
from kerasseq.translator import get_translator


def resolve_vocab_sizes(source_vocab_size, target_vocab_size, source_tokenizer, target_tokenizer):
    """Vocabulary sizes given directly or taken from the tokenizers, validated.

    Returns:
        `(source_vocab_size, target_vocab_size)`, ints >= 5 (4 reserved ids and
        at least one token).
    """
    sizes = {}
    for side, size, tokenizer in (("source", source_vocab_size, source_tokenizer),
                                  ("target", target_vocab_size, target_tokenizer)):
        name = f"{side}_vocab_size"
        if size is None:
            if tokenizer is None:
                raise ValueError(f"Pass {name} or {side}_tokenizer.")
            size = tokenizer.vocabulary_size
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 5:
            raise ValueError(
                f"{name} must be an int >= 5 (4 reserved ids + at least one token). "
                f"Received: {name}={size!r}"
            )
        sizes[side] = int(size)
    return sizes["source"], sizes["target"]


def build_seq2seq(model_class, source_vocab_size, target_vocab_size, source_tokenizer,
                  target_tokenizer, **settings):
    """What the `build_*_seq2seq` functions share: `model_class(...)` with its
    vocabulary sizes given, or read from the tokenizers (`resolve_vocab_sizes`)."""
    source_vocab_size, target_vocab_size = resolve_vocab_sizes(
        source_vocab_size, target_vocab_size, source_tokenizer, target_tokenizer
    )
    return model_class(source_vocab_size, target_vocab_size, source_tokenizer=source_tokenizer,
                       target_tokenizer=target_tokenizer, **settings)


def check_shared_vocabulary(share_embeddings, source_vocab_size, target_vocab_size):
    if share_embeddings and source_vocab_size != target_vocab_size:
        raise ValueError(
            "share_embeddings=True needs one vocabulary for source and target. "
            f"Received: source_vocab_size={source_vocab_size}, "
            f"target_vocab_size={target_vocab_size}"
        )


class Seq2SeqModel(keras.Model):
    """Base class of kerasseq's functional encoder–decoder models.

    Subclasses build their layers and the functional training graph (see
    "construction" below: `_training_inputs`, `_init_graph`; `get_config` and
    `from_config` come from here) and implement `encode` and `decode_step`.
    The optional `source_tokenizer` / `target_tokenizer`
    (`kerasseq.data.TextTokenizer`) are saved in the model's config, so a
    `.keras` file is all that is needed to translate text.
    """

    source_length_multiple = 8

    # ----------------------------------------------------------- tokenizers
    # The tokenizers are data, not part of the compute graph: they are kept
    # out of Keras' layer tracking (a tracked `StringLookup` has
    # `supports_jit=False`, which would make Keras refuse XLA for the whole
    # model, `jit_compile="auto"` on a GPU included). They are saved through
    # `get_config`, and `kerasseq.export` tracks their lookup tables itself.
    # The translator cache (`translator_cache`) is no layer state either.
    _TOKENIZERS = ("source_tokenizer", "target_tokenizer")
    _UNTRACKED = _TOKENIZERS + ("translator_cache",)

    def __setattr__(self, name, value):
        if name in self._UNTRACKED:
            if name in self._TOKENIZERS and isinstance(value, dict):  # a saved config
                value = keras.saving.deserialize_keras_object(value)
            object.__setattr__(self, "_untracked_" + name, value)
            return
        super().__setattr__(name, value)

    @property
    def source_tokenizer(self):
        """The `TextTokenizer` of the source side, or `None` (ids only)."""
        return self.__dict__.get("_untracked_source_tokenizer")

    @property
    def target_tokenizer(self):
        """The `TextTokenizer` of the target side, or `None` (ids only)."""
        return self.__dict__.get("_untracked_target_tokenizer")

    @property
    def translator_cache(self):
        """The model's translators, one per `SearchConfig` (see `translator`).

        A plain dict owned by the model (so it goes when the model goes),
        kept out of Keras' tracking and out of the saved config.
        """
        cache = self.__dict__.get("_untracked_translator_cache")
        if cache is None:
            self.translator_cache = cache = {}  # stored untracked by __setattr__
        return cache

    # -------------------------------------------------------- construction
    # A subclass's constructor takes the vocabulary sizes first and the
    # tokenizers, `*args` and `**kwargs` last (`*args`: see cloning below),
    # builds its layers on `_training_inputs()`, hands the training graph to
    # `_init_graph` and stores every other argument under its own name:
    # `get_config` reads the arguments back from those attributes.

    @staticmethod
    def _training_inputs():
        """The inputs of the training graph: `source_ids` and `target_in_ids`.

        Returns:
            Two int32 `keras.Input`s of shape `(batch_size, None)`.
        """
        return (keras.Input(shape=(None,), dtype="int32", name="source_ids"),
                keras.Input(shape=(None,), dtype="int32", name="target_in_ids"))

    def _init_graph(self, inputs, outputs, source_vocab_size, target_vocab_size,
                    source_tokenizer, target_tokenizer, **kwargs):
        """`keras.Model`'s functional constructor, then the vocabularies.

        Args:
            inputs: the two tensors of `_training_inputs()`.
            outputs: the logits tensor computed from them.
            source_tokenizer, target_tokenizer: tokenizers, their saved
                configs (dicts) or `None`.
            **kwargs: `name` and other `keras.Model` arguments.
        """
        super().__init__(inputs=list(inputs), outputs=outputs, **kwargs)
        self.source_tokenizer = source_tokenizer  # deserialized by __setattr__
        self.target_tokenizer = target_tokenizer
        self.source_vocab_size = source_vocab_size
        self.target_vocab_size = target_vocab_size

    def get_config(self):
        """`name` and every named argument of the constructor, read from the
        attribute of the same name (tokenizers as their Keras configs)."""
        config = {"name": self.name}
        for name, parameter in inspect.signature(type(self).__init__).parameters.items():
            if name != "self" and parameter.kind not in (parameter.VAR_POSITIONAL,
                                                         parameter.VAR_KEYWORD):
                value = getattr(self, name)
                if name in self._TOKENIZERS and value is not None:
                    value = keras.saving.serialize_keras_object(value)
                config[name] = value
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    # ------------------------------------------------------------- cloning
    # `keras.models.clone_model` calls `type(model)(inputs, outputs, name=...)`
    # for a constructor taking `*args`; the graph run below marks its outputs
    # with the model they came from and `_init_as_clone` rebuilds that model
    # from its config, then takes the cloned layers' weights (only the
    # weights: `input_tensors`, `call_function` and a `clone_function` that
    # changes settings or names do not apply; use `from_config` for those).
    # Why this private hook: docs/design.md, "The private Keras hooks".

    def _run_through_graph(self, inputs, *args, **kwargs):
        outputs = super()._run_through_graph(inputs, *args, **kwargs)
        for tensor in keras.tree.flatten(outputs):
            if isinstance(tensor, keras.KerasTensor):
                tensor._kerasseq_graph_of = weakref.ref(self)
        return outputs

    def _init_as_clone(self, positional, kwargs):
        """Build `self` as a clone when called as `cls(inputs, outputs, name=...)`.

        Returns:
            False when the arguments are ordinary constructor arguments (the
            caller goes on), True when `self` was built as a clone.

        Raises:
            TypeError: stray positional arguments, or (inputs, outputs) tensors
                that do not come from a kerasseq model's graph.
        """
        if len(positional) > 2:
            raise TypeError(
                f"{type(self).__name__}() takes its settings as keyword arguments after "
                f"the vocabulary sizes. Received {len(positional) - 2} extra positional "
                f"argument(s): {positional[2:]!r}"
            )
        inputs, outputs = positional[0], positional[1]
        if not any(isinstance(x, keras.KerasTensor) for x in keras.tree.flatten([inputs, outputs])):
            return False
        reference = getattr(outputs, "_kerasseq_graph_of", None)
        source = reference() if reference is not None else None
        if not isinstance(source, type(self)):
            raise TypeError(
                f"{type(self).__name__} is built from its settings (vocabulary sizes, "
                "sizes, tokenizers), not from (inputs, outputs) tensors; only "
                "keras.models.clone_model(model) may call it that way. Build a model "
                "from tensors with keras.Model(inputs, outputs)."
            )
        config = source.get_config()
        if kwargs.get("name"):
            config["name"] = kwargs["name"]
        type(self).__init__(self, **config)
        # The weights of the layers clone_model made (fresh, or a
        # clone_function's), layer by layer where name and shapes match (a
        # tied output projection has another layout: it keeps its fresh ones).
        ours = {layer.name: layer for layer in self.layers}
        for layer in keras.Model(inputs, outputs).layers:
            target = ours.get(layer.name)
            if target is None or not layer.weights:
                continue
            if [w.shape for w in layer.weights] == [w.shape for w in target.weights]:
                target.set_weights(layer.get_weights())
        return True

    # ------------------------------------------------------------ training
    def fit(self, x=None, y=None, *args, **kwargs):
        """`keras.Model.fit`; a `tf.data.Dataset` is not re-shuffled by Keras.

        Keras ignores `shuffle` for a dataset (its order is the dataset's:
        `kerasseq.data.make_dataset` shuffles every epoch) and warns about
        its default `shuffle=True`; kerasseq models pass `shuffle=False` for
        datasets unless the caller set `shuffle`, so `fit` prints no warning.
        """
        if "shuffle" not in kwargs and len(args) < 7 and isinstance(x, tf.data.Dataset):
            kwargs["shuffle"] = False
        if isinstance(x, tf.data.Dataset):
            self._build_training_state(x.element_spec)
        elif x is not None and y is not None:
            self._build_training_state((x, y))
        return super().fit(x, y, *args, **kwargs)

    def _build_training_state(self, batch):
        """Create the optimizer's, loss's and metrics' variables before a training step is traced.

        `batch`: one batch `(x, y[, sample_weight])` or its specs (only shapes
        and dtypes are read). Without it Keras' TensorFlow trainer creates them
        in the step's first trace and `tf.function` traces the step twice; it
        calls Keras' private `_symbolic_build` (docs/design.md, "The private
        Keras hooks"). A batch it cannot describe is left to Keras.
        """
        if getattr(self, "optimizer", None) is None:  # not compiled: fit says so
            return
        if not (isinstance(batch, tuple) and len(batch) in (2, 3)) or not all(
                hasattr(v, "shape") and hasattr(v, "dtype") for v in keras.tree.flatten(batch)):
            return
        if distribute.carries_links(batch):
            return
        try:
            with self.distribute_strategy.scope():
                self._symbolic_build(data_batch=batch)
        except (RuntimeError, ValueError, TypeError):
            return  # a bad batch: `fit` itself raises Keras' own error for it

    def train_step(self, data):
        """Keras' training step; with several replicas, the exact distributed step.

        Under a `tf.distribute` strategy with more than one replica the step
        all-reduces before it clips and reports the global batch's loss
        (`kerasseq.training.distribute.exact_train_step`), so it equals the
        one-device step on the same global batch. A batch with alignment
        links (guided alignment) takes kerasseq's one-device step, which gets
        its loss from `compute_predictions_and_loss`.
        """
        data = self._with_checked_ids(data)
        if distribute.uses_exact_step():
            return distribute.exact_train_step(self, data)
        if distribute.carries_links(data):
            return distribute.one_device_train_step(self, data)
        return super().train_step(data)

    def test_step(self, data):
        data = self._with_checked_ids(data)
        if distribute.uses_exact_step():
            return distribute.exact_test_step(self, data)
        if distribute.carries_links(data):
            return distribute.one_device_test_step(self, data)
        return super().test_step(data)

    def _with_checked_ids(self, data):
        """`data` (a training or evaluation batch) after a check of its ids.

        Every id of `source_ids`, `target_in_ids` and the labels must lie in
        `[0, vocabulary size)` of its side; else the step stops with
        `tf.errors.InvalidArgumentError` "assertion failed: [target_out_ids
        (y) holds an id outside [0, 40) ...]" and the batch's smallest and
        largest id, before the embedding lookup or the loss fail on it (on a
        CPU deep inside TensorFlow; on a GPU a lookup beyond the table reads
        zeros silently). A batch of `kerasseq.data.make_dataset` never holds
        such ids; a user's own arrays or dataset can. The check is graph ops
        (`tf.debugging.Assert`); an XLA-compiled step (`jit_compile=True`,
        the default on a GPU) skips them, as XLA does every assertion.
        """
        x, y, _ = keras.utils.unpack_x_y_sample_weight(data)
        if isinstance(x, dict):
            named = [(x.get("source_ids"), "source_ids", "source"),
                     (x.get("target_in_ids"), "target_in_ids", "target")]
        elif isinstance(x, (tuple, list)) and len(x) == 2:
            named = [(x[0], "source_ids (x[0])", "source"),
                     (x[1], "target_in_ids (x[1])", "target")]
        else:
            named = []
        named.append((y, "target_out_ids (y)", "target"))
        checks = []
        for ids, name, side in named:
            size = getattr(self, f"{side}_vocab_size", None)
            if (not isinstance(size, numbers.Integral) or not isinstance(ids, tf.Tensor)
                    or not ids.dtype.is_integer):
                continue
            inside = tf.logical_and(tf.reduce_all(ids >= 0), tf.reduce_all(ids < size))
            checks.append(tf.debugging.Assert(inside, [
                f"{name} holds an id outside [0, {size}) (the {side} vocabulary size is "
                f"{size}); the smallest and largest id of the batch:",
                tf.reduce_min(ids), tf.reduce_max(ids)]))
        if not checks:
            return data
        with tf.control_dependencies(checks):  # before anything reads the ids
            return tf.nest.map_structure(
                lambda value: tf.identity(value) if isinstance(value, tf.Tensor) else value, data)

    def compute_predictions_and_loss(self, x, y, sample_weight=None, training=True):
        """`(y_pred, loss)` of one batch: the forward pass and `compute_loss`.

        Where kerasseq's training and evaluation steps get a batch's
        predictions and loss; a model with a loss term of its own (the
        Transformer's guided alignment) overrides it.
        """
        y_pred = self(x, training=training)
        loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                 training=training)
        return y_pred, loss

    # ------------------------------------------------------------ contract
    def encode(self, source_ids, max_length=None):
        """Source ids `(batch_size, source_length)` → the decoding state.

        `max_length` is the most tokens the search will generate; a model
        that preallocates a cache sizes it to that (the Transformer), others
        need no such size (the RNN keeps one recurrent state).
        """
        raise NotImplementedError

    def decode_step(self, token_ids, state, step):
        raise NotImplementedError

    def check_search_config(self, config):
        """Model-specific checks of a `kerasseq.SearchConfig` (none here)."""

    @property
    def start_id(self):
        return self.target_tokenizer.start_id if self.target_tokenizer is not None else START_ID

    @property
    def end_id(self):
        return self.target_tokenizer.end_id if self.target_tokenizer is not None else END_ID

    def trim_source_ids(self, source_ids):
        """Hook for models with a maximum source length (identity here).

        Part of the decoding contract
        (`kerasseq.decoding.contract.OPTIONAL_ATTRIBUTES`): the translator
        calls it before it pads the ids to a bucket, on NumPy ids eagerly and
        on int32 tensors inside an export's graph.
        """
        return source_ids

    # ------------------------------------------------------------ decoding
    def translator(self, config=None, **settings):
        """The `kerasseq.Translator` of this model for these search settings.

        Translators are cached per `SearchConfig`, so repeated calls with the
        same settings reuse the compiled functions.

        Args:
            config: a `kerasseq.SearchConfig` (default: beam search, 4 beams).
            **settings: `SearchConfig` fields replacing those of `config`.
        """
        return get_translator(self, config, **settings)

    def generate(self, source_ids, config=None, **settings):
        """Decode token ids with `kerasseq.Translator.generate` (beam 4 by default).

        Args:
            source_ids: int `(batch_size, source_length)`, 0 = padding.
            config: optional `kerasseq.SearchConfig`.
            **settings: `SearchConfig` fields replacing those of `config`.

        Returns and raises what `kerasseq.Translator.generate` does (and
        `kerasseq.SearchConfig` for the settings).
        """
        return self.translator(config, **settings).generate(source_ids)

    def translate(self, texts, config=None, *, return_scores=False, verbose=0,
                  return_alignments=False, alignment_layer=None,
                  alignment_head=None, **settings):
        """Translate strings end to end with `kerasseq.Translator.translate`.

        Beam search with 4 beams by default, as every entry point. A source
        tokenizer's `max_length` cuts every source to its first `max_length`
        tokens; beyond that, see the "Lengths" section of the model's class.

        Args:
            texts: a string or a list of strings, or what `kerasseq.translate`
                takes as text: a `tf.string` tensor or array (one string or a
                batch), a `tf.data.Dataset` of strings (read to its end), bytes
                (UTF-8; invalid bytes become U+FFFD, as in exports).
            config: optional `kerasseq.SearchConfig`.
            return_scores: also return the search scores.
            verbose: 1 shows a Keras progress bar over the texts.
            return_alignments: also return word alignments from the attention.
            alignment_layer, alignment_head: the attention that aligns.
            **settings: `SearchConfig` fields replacing those of `config`.

        Returns what `kerasseq.Translator.translate` does (blank texts, n-best
        lists, scores and alignments are described there).
        """
        translator = self.translator(config, **settings)  # checks the settings first
        return translator.translate(
            as_texts(texts), return_scores=return_scores, verbose=verbose,
            return_alignments=return_alignments, alignment_layer=alignment_layer,
            alignment_head=alignment_head,
        )
