import os
import subprocess
import sys

import keras
import pytest

from kerasseq import _backend_check


def _run(code, **env):
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env}
    environment.pop("KERAS_BACKEND", None) if "KERAS_BACKEND" not in env else None
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True,
                          text=True, timeout=300)


def test_other_backend_in_environment_is_a_clear_import_error():
    result = _run("import kerasseq", KERAS_BACKEND="jax")
    assert result.returncode != 0
    assert "ImportError" in result.stderr and "KERAS_BACKEND=tensorflow" in result.stderr
    assert "Received: KERAS_BACKEND='jax'" in result.stderr


def test_no_backend_chosen_selects_tensorflow():
    result = _run("import kerasseq, keras; print(keras.backend.backend())")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("tensorflow")


def test_keras_already_loaded_with_other_backend(monkeypatch):
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    with pytest.raises(ImportError, match="already loaded with the 'jax' backend"):
        _backend_check._check()
