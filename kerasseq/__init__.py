"""kerasseq: sequence-to-sequence models for Keras 3 on the TensorFlow backend.

Subpackages: `kerasseq.layers`, `kerasseq.models`, `kerasseq.decoding`,
`kerasseq.data`, `kerasseq.training`, `kerasseq.evaluation`.

The public names are imported lazily (PEP 562): `import kerasseq` loads
neither TensorFlow nor Keras (so `kerasseq --help` answers at once); the
first use of a name, `kerasseq.Translator` say, imports what it needs.
"""

import importlib
import importlib.util

from kerasseq import _backend_check  # noqa: F401  (chooses the TensorFlow backend; stdlib only)

__version__ = "0.1.0"

# {public name: (module, attribute in it, or None for the module itself)}
_LAZY = {
    "SearchConfig": ("kerasseq.translator", "SearchConfig"),
    "Translator": ("kerasseq.translator", "Translator"),
    "build_rnn_seq2seq": ("kerasseq.models", "build_rnn_seq2seq"),
    "build_transformer_seq2seq": ("kerasseq.models", "build_transformer_seq2seq"),
    "data": ("kerasseq.data", None),
    "decoding": ("kerasseq.decoding", None),
    "layers": ("kerasseq.layers", None),
    "models": ("kerasseq.models", None),
    "training": ("kerasseq.training", None),
    "translate": ("kerasseq.models", "translate"),
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name not in _LAZY:
        # Any other submodule (`kerasseq.evaluation`, `kerasseq.export`, ...), as
        # when this package imported its subpackages eagerly.
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module 'kerasseq' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # the next access does not come here
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
