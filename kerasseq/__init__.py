"""kerasseq: sequence-to-sequence models for Keras 3 on the TensorFlow backend.

Subpackages: `kerasseq.layers`, `kerasseq.models`, `kerasseq.decoding`,
`kerasseq.data`, `kerasseq.training`, `kerasseq.evaluation`.
"""

from kerasseq import (  # noqa: E402
    _backend_check,  # noqa: F401  (must run before keras is used)
    data,
    decoding,
    layers,
    models,
    training,
)
from kerasseq.models import (  # noqa: E402
    build_rnn_seq2seq,
    build_transformer_seq2seq,
    translate,
)
from kerasseq.translator import SearchConfig, Translator  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "SearchConfig",
    "Translator",
    "build_rnn_seq2seq",
    "build_transformer_seq2seq",
    "data",
    "decoding",
    "layers",
    "models",
    "training",
    "translate",
]
