"""kerasseq: sequence-to-sequence models for Keras 3 on the TensorFlow backend.

Subpackages: `kerasseq.layers`, `kerasseq.models`, `kerasseq.decoding`,
`kerasseq.data`, `kerasseq.training`, `kerasseq.evaluation`.
"""

from kerasseq import _backend_check  # noqa: F401  (must run before keras is used)
from kerasseq import data, decoding, layers, models, training  # noqa: E402
from kerasseq.models import build_rnn_seq2seq  # noqa: E402

__version__ = "0.1.0"

__all__ = ["build_rnn_seq2seq", "data", "decoding", "layers", "models", "training"]
