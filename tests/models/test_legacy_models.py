"""`.keras` files saved before the attention API change (issue 24) still load.

The files in tests/models/legacy/ were written by make_legacy_models.py with
the code of commit 44f5bdb (our own MultiHeadAttention, the old mask and cache
names). Loading them with today's code must give the same logits and the
same translations.
"""

import json
import pathlib

import keras
import numpy as np
import pytest

from tests.models.legacy.make_legacy_models import SOURCE_IDS, TARGET_IN_IDS

LEGACY = pathlib.Path(__file__).parent / "legacy"


@pytest.mark.parametrize("name", ["rnn_bahdanau", "transformer"])
def test_legacy_file_loads_and_translates_the_same(name):
    expected_logits = np.load(LEGACY / "expected.npz")[f"{name}_logits"]
    expected = json.loads((LEGACY / "expected.json").read_text())
    model = keras.models.load_model(LEGACY / f"{name}.keras")
    logits = np.asarray(model([SOURCE_IDS, TARGET_IN_IDS]))
    np.testing.assert_allclose(logits, expected_logits, atol=1e-5)
    words = expected["words"]
    assert model.translate(words, method="greedy") == expected[f"{name}_greedy"]
    assert model.translate(words, method="beam", num_beams=3) == expected[f"{name}_beam"]
