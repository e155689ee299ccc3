"""Draw the graphs of the two kerasseq models with `keras.utils.model_to_dot`.

Needs pydot (`pip install -e '.[plot]'`) and Graphviz's `dot` (Debian
`graphviz`, installed by `make examples-data`). Writes
`docs/images/rnn_seq2seq_graph.png` and `docs/images/transformer_seq2seq_graph.png`
(linked from the home page, `docs/index.md`; the Transformer's is shown on
`docs/components/transformer_seq2seq.md`):

    .venv/bin/python docs/plot_models.py [--output-dir docs/images]

The pictures are what `keras.utils.plot_model(model, show_shapes=True)` draws,
made narrow enough to be read in the site's text column (about 690 px at a
1280-px window) at their own size, where Keras' 14-point text is 14 px high
(`dpi=72`):

- each box lists its input shape and its output shape one under the other,
  one tensor a line, instead of side by side on one long line;
- the Transformer's decoder is drawn under its encoder (an invisible edge puts
  the decoder's input below the encoder's last block), not beside it.
"""

import argparse
import os
import re

import keras
import pydot

from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq

# Points per inch: Keras' 14-point shapes and 16-point names are then 14 and 16 px.
DPI = 72

# {file name: (model builder, {layer name: layer it is drawn below})}.
MODELS = {
    "rnn_seq2seq_graph.png": (lambda: build_rnn_seq2seq(
        40, 50, embedding_dim=64, units=128, attention="bahdanau", name="rnn_seq2seq"), {}),
    "transformer_seq2seq_graph.png": (lambda: build_transformer_seq2seq(
        40, 50, num_layers=2, d_model=128, num_heads=4, dff=512, name="transformer_seq2seq"),
        {"target_in_ids": "encoder_block_1"}),
}

# Keras' label for a layer: a table with the name in its first row and the
# shapes side by side in its second (keras/src/utils/model_visualization.py).
_CELL = re.compile(r'<td bgcolor="white">(.*?)</td>')
_ROWS = re.compile(r"^(<<table [^>]*>)(<tr>.*?</tr>)(<tr>.*</tr>)?(</table>>)$")


def stacked_label(label):
    """Keras' HTML label of one layer with its shape cells one under the other,
    a shape that lists several tensors written one tensor a line."""
    match = _ROWS.match(label)
    if match is None:
        raise ValueError(f"not a keras.utils.model_to_dot layer label: {label!r}")
    table, name_row, shape_row, end = match.groups()
    table = table.replace('cellpadding="10"', 'cellpadding="4"')
    name_row = re.sub(r'colspan="\d+"', 'colspan="1"', name_row)
    rows = [
        '<tr><td bgcolor="white" align="left" balign="left">'
        + cell.replace("), (", "),<br/>(") + "</td></tr>"
        for cell in _CELL.findall(shape_row or "")
    ]
    return table + name_row + "".join(rows) + end


def model_graph(model, below=None):
    """The `pydot.Dot` graph of `model` as plot_model draws it, stacked (see
    `stacked_label`), each layer named in `below` under the layer it names."""
    graph = keras.utils.model_to_dot(model, show_shapes=True, show_layer_names=True,
                                     rankdir="TB", dpi=DPI)
    graph.set("ranksep", "0.3")
    for node in graph.get_nodes():
        label = node.get("label")
        if label and label.startswith("<<table"):
            node.set("label", stacked_label(label))
    for layer, above in (below or {}).items():
        edge = pydot.Edge(str(id(model.get_layer(above))), str(id(model.get_layer(layer))))
        edge.set("style", "invis")
        graph.add_edge(edge)
    return graph


def plot_models(output_dir):
    """Write one PNG per model; returns `{file name: model}`."""
    os.makedirs(output_dir, exist_ok=True)
    models = {}
    for name, (build, below) in MODELS.items():
        model = build()
        model_graph(model, below).write(os.path.join(output_dir, name), format="png")
        models[name] = model
    return models


def main(argv=None):
    parser = argparse.ArgumentParser(description="Draw the two kerasseq models' graphs.")
    parser.add_argument("--output-dir", default=os.path.join(os.path.dirname(__file__), "images"))
    plot_models(parser.parse_args(argv).output_dir)


if __name__ == "__main__":
    main()
