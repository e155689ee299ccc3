import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kerasseq  # noqa: E402,F401  (checks the backend)


@pytest.fixture(autouse=True)
def _seed_everything():
    keras.utils.set_random_seed(1234)
    np.random.seed(1234)
    yield
