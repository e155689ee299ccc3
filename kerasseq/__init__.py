"""kerasseq: sequence-to-sequence models for Keras 3 on the TensorFlow backend.

Subpackages: `kerasseq.layers`, `kerasseq.models`, `kerasseq.decoding`,
`kerasseq.data`, `kerasseq.training`, `kerasseq.alignment` (word
alignments); modules `kerasseq.evaluation`, `kerasseq.export` (SavedModel),
`kerasseq.tflite`, `kerasseq.plotting`. A bad argument raises
`kerasseq.ArgumentError` (a `ValueError` naming it in `.field`), a bad
search setting its subclass `kerasseq.SearchConfigError`.

`import kerasseq` imports them all (and TensorFlow) and so registers every
serializable class with Keras: after it, `keras.models.load_model` loads any
kerasseq model, whether built by `build_rnn_seq2seq` /
`build_transformer_seq2seq` or wired by hand from kerasseq layers, with its
tokenizers and its compiled loss, metric and schedule (Keras imports the
module named in a `.keras` file by itself only for its own packages, so every
other package registers its classes when imported, as keras-hub does). The
command line's parser is the separate package `kerasseq_cli` (standard
library only), so `kerasseq --help` needs none of this.
"""

from kerasseq import (
    _backend_check,  # noqa: F401  (chooses the TensorFlow backend; before Keras)
    alignment,
    data,
    decoding,
    evaluation,
    export,
    layers,
    models,
    plotting,
    tflite,
    training,
)
from kerasseq._validation import ArgumentError
from kerasseq.decoding.config import SearchConfig, SearchConfigError
from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq
from kerasseq.translation import translate
from kerasseq.translator import Translator

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "SearchConfig",
    "SearchConfigError",
    "Translator",
    "alignment",
    "build_rnn_seq2seq",
    "build_transformer_seq2seq",
    "data",
    "decoding",
    "evaluation",
    "export",
    "layers",
    "models",
    "plotting",
    "tflite",
    "training",
    "translate",
]
