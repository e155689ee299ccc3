"""Draw the graphs of the two kerasseq models with `keras.utils.plot_model`.

Needs pydot (`pip install -e '.[plot]'`) and Graphviz's `dot` (Debian
`graphviz`, installed by `make examples-data`). Writes
`docs/images/rnn_seq2seq_graph.png` and `docs/images/transformer_seq2seq_graph.png`
(shown in `docs/components/transformer_seq2seq.md` and `docs/components/gru_decoder.md`):

    .venv/bin/python docs/plot_models.py [--output-dir docs/images]
"""

import argparse
import os

import keras

from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq

MODELS = {
    "rnn_seq2seq_graph.png": lambda: build_rnn_seq2seq(
        40, 50, embedding_dim=64, units=128, attention="bahdanau", name="rnn_seq2seq"),
    "transformer_seq2seq_graph.png": lambda: build_transformer_seq2seq(
        40, 50, num_layers=2, d_model=128, num_heads=4, dff=512, name="transformer_seq2seq"),
}


def plot_models(output_dir):
    """Write one PNG per model; returns `{file name: model}`."""
    os.makedirs(output_dir, exist_ok=True)
    models = {}
    for name, build in MODELS.items():
        model = build()
        keras.utils.plot_model(model, to_file=os.path.join(output_dir, name), show_shapes=True,
                               show_layer_names=True, dpi=72)
        models[name] = model
    return models


def main(argv=None):
    parser = argparse.ArgumentParser(description="Draw the two kerasseq models' graphs.")
    parser.add_argument("--output-dir", default=os.path.join(os.path.dirname(__file__), "images"))
    plot_models(parser.parse_args(argv).output_dir)


if __name__ == "__main__":
    main()
