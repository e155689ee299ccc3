"""Writes the small `.keras` files of tests/models/test_legacy_models.py.

Run once, before the attention API change of issue 24 (commit "legacy .keras
fixtures"), from the repository root:

    PYTHONPATH=$PWD python tests/models/legacy/make_legacy_models.py

It trains a tiny Bahdanau RNN and a one-layer Transformer on the 30-word G2P
task for 40 short epochs (120 steps), saves them, and records their teacher-forced logits on
fixed ids and their greedy and beam translations of fixed words in
`expected.npz` / `expected.json`. The test loads the files with today's code
and checks the same numbers: a model saved by the old code keeps working.
Do not rerun it after the change (the point is that the files are old).
"""

import json
import pathlib

import keras
import numpy as np

from kerasseq.data import make_dataset
from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq
from kerasseq.training import MaskedSparseCategoricalCrossentropy
from tests.models.g2p_fixture import tiny_g2p

HERE = pathlib.Path(__file__).parent
SOURCE_IDS = np.array([[5, 6, 7, 8, 0, 0], [9, 5, 4, 0, 0, 0], [6, 6, 6, 6, 6, 6]], "int32")
TARGET_IN_IDS = np.array([[2, 5, 7, 4, 9], [2, 6, 0, 0, 0], [2, 8, 8, 8, 8]], "int32")


def builders(source, target):
    return {
        "rnn_bahdanau": lambda: build_rnn_seq2seq(
            embedding_dim=8, units=16, attention="bahdanau", max_target_length=10,
            source_tokenizer=source, target_tokenizer=target),
        "transformer": lambda: build_transformer_seq2seq(
            num_layers=1, d_model=16, num_heads=2, dff=32, dropout=0.0, max_length=16,
            source_tokenizer=source, target_tokenizer=target),
    }


def outputs(model, words):
    """What the test compares: logits on fixed ids, greedy and beam translations."""
    return {
        "logits": np.asarray(model([SOURCE_IDS, TARGET_IN_IDS]), "float32"),
        "greedy": model.translate(words, method="greedy"),
        "beam": model.translate(words, method="beam", num_beams=3),
    }


def main():
    entries, pairs, source, target = tiny_g2p()
    words = [word for word, _ in entries[:6]]
    arrays, texts = {}, {"words": words}
    for name, build in builders(source, target).items():
        keras.utils.set_random_seed(0)
        model = build()
        model.compile(optimizer=keras.optimizers.Adam(1e-2),
                      loss=MaskedSparseCategoricalCrossentropy())
        model.fit(make_dataset(pairs, source, target, batch_size=10, seed=0), epochs=40,
                  verbose=0)
        model.save(HERE / f"{name}.keras")
        result = outputs(model, words)
        arrays[f"{name}_logits"] = result["logits"]
        texts[f"{name}_greedy"] = result["greedy"]
        texts[f"{name}_beam"] = result["beam"]
    np.savez(HERE / "expected.npz", **arrays)
    (HERE / "expected.json").write_text(json.dumps(texts, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
