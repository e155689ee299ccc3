"""`import kerasseq` is cheap (PEP 562 lazy names): TensorFlow loads on first use."""

import os
import subprocess
import sys

import kerasseq


def test_import_kerasseq_does_not_load_tensorflow_until_a_name_is_used():
    code = ("import sys\n"
            "import kerasseq\n"
            "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules, 'eager'\n"
            "assert 'Translator' in dir(kerasseq) and 'Translator' in kerasseq.__all__\n"
            "assert 'tensorflow' not in sys.modules, 'dir() imported TensorFlow'\n"
            "translator = kerasseq.Translator\n"
            "import keras\n"
            "assert 'tensorflow' in sys.modules and keras.backend.backend() == 'tensorflow'\n"
            "from kerasseq.translator import Translator\n"
            "assert translator is Translator\n"
            "print('ok')\n")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("KERAS_BACKEND", None)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_every_public_name_resolves():
    for name in kerasseq.__all__:
        assert getattr(kerasseq, name) is not None, name
    assert kerasseq.data.load_pairs is not None
    try:
        kerasseq.no_such_name  # noqa: B018
    except AttributeError as error:
        assert "no_such_name" in str(error)
    else:
        raise AssertionError("kerasseq.no_such_name should raise AttributeError")


def test_submodules_are_attributes_too():
    assert kerasseq.evaluation.corpus_bleu is not None
    assert kerasseq.plotting.plot_learning_curves is not None
