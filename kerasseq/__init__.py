"""kerasseq: sequence-to-sequence models for Keras 3 on the TensorFlow backend."""

from kerasseq import _backend_check  # noqa: F401  (must run before keras is used)

__version__ = "0.1.0"
