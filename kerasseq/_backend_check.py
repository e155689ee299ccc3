"""Make sure Keras runs on the TensorFlow backend before anything else imports it.

kerasseq uses `tf.data`, `tf.function` decoding and SavedModel export, so it
only works with `KERAS_BACKEND=tensorflow`. If no backend was chosen yet we
choose TensorFlow; if another one was chosen we stop with an ImportError that
says how to fix it. Standard library only, so `import kerasseq` stays cheap:
Keras is imported here only when it is already loaded (to ask its backend);
otherwise setting `KERAS_BACKEND` is enough (the variable takes precedence
over ~/.keras/keras.json when Keras is imported later).
"""

import os
import sys

_FIX = (
    "kerasseq requires the TensorFlow backend of Keras. Set the environment "
    "variable KERAS_BACKEND=tensorflow before Python starts (or before the first "
    "`import keras`)."
)


def _check():
    requested = os.environ.get("KERAS_BACKEND")
    if "keras" not in sys.modules:
        if requested and requested != "tensorflow":
            raise ImportError(f"{_FIX} Received: KERAS_BACKEND={requested!r}.")
        os.environ["KERAS_BACKEND"] = "tensorflow"
        return
    import keras

    backend = keras.backend.backend()
    if backend != "tensorflow":
        raise ImportError(
            f"{_FIX} Keras is already loaded with the {backend!r} backend "
            f"(KERAS_BACKEND={requested!r}, or ~/.keras/keras.json)."
        )


_check()
