"""Draw the documentation figures that are computed with kerasseq's own code.

    python docs/make_figures.py                      # writes into docs/images/
    python docs/make_figures.py --output-dir /tmp/x  # anywhere else

Figures (PNG, 100 dpi):

- `positional_encoding.png`: the sinusoidal position table that
  `kerasseq.layers.PositionalEmbedding` adds to the token embeddings,
  positions x depth (shown on `components/positional_embedding.md`);
- `learning_rate_schedule.png`: `kerasseq.training.TransformerSchedule`, the
  warm-up / inverse-square-root learning rate of "Attention Is All You Need"
  (shown on `components/transformer_seq2seq.md`).

Each `*_figure` function returns the figure together with the arrays it
plots, so that `tests/test_docs_figures.py` can check the plotted numbers
against an independent computation. Figures are built with
`matplotlib.figure.Figure` (no `pyplot`), so no display is needed.
"""

import argparse
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

DEFAULT_OUTPUT_DIR = Path(__file__).resolve().parent / "images"
DPI = 100

# The page's worked example (`components/transformer_seq2seq.md`) uses
# d_model = 512, warmup_steps = 4000; the TensorFlow tutorial plots d_model = 128.
SCHEDULE_SETTINGS = ((512, 4000), (128, 4000))


def positional_encoding_figure(length=100, d_model=128):
    """Heatmap of the position table of `PositionalEmbedding(max_positions=length)`.

    Args:
        length: number of positions (rows of the heatmap).
        d_model: encoding depth (columns).

    Returns:
        `(figure, table)`: the figure and the plotted float32 array
        `(length, d_model)`, the layer's own `encoding_table`.
    """
    from kerasseq.layers import PositionalEmbedding

    layer = PositionalEmbedding(vocab_size=2, d_model=d_model, max_positions=length)
    table = np.asarray(layer.encoding_table)  # (length, d_model), what the layer adds
    figure = Figure(figsize=(7.0, 4.2), dpi=DPI, layout="constrained")
    ax = figure.add_subplot()
    image = ax.imshow(table, cmap="RdBu", vmin=-1.0, vmax=1.0, aspect="auto",
                      interpolation="nearest", origin="upper")
    ax.set_xlabel("depth (column of the code; even columns sin, odd columns cos)")
    ax.set_ylabel("position")
    ax.set_title(f"Sinusoidal positional encoding, d_model = {d_model}")
    figure.colorbar(image, ax=ax, label="PE(position, column)")
    return figure, table


def learning_rate_figure(settings=SCHEDULE_SETTINGS, num_steps=40000):
    """Learning rate of `TransformerSchedule` over the first `num_steps` steps.

    Args:
        settings: `(d_model, warmup_steps)` pairs, one curve each.
        num_steps: steps on the x axis, counted from 1 as the schedule does
            (the optimizer's iteration 0 is step 1).

    Returns:
        `(figure, steps, rates)`: the figure, int array `(num_steps,)` of the
        steps 1..num_steps, and float array `(len(settings), num_steps)` of
        the plotted learning rates.
    """
    from kerasseq.training import TransformerSchedule

    steps = np.arange(1, num_steps + 1)
    iterations = steps - 1  # what the optimizer passes to the schedule
    rates = np.stack([
        np.asarray(TransformerSchedule(d_model, warmup_steps=warmup)(iterations), dtype=np.float64)
        for d_model, warmup in settings
    ])  # (len(settings), num_steps)
    figure = Figure(figsize=(7.0, 3.8), dpi=DPI, layout="constrained")
    ax = figure.add_subplot()
    for (d_model, warmup), curve in zip(settings, rates, strict=True):
        ax.plot(steps, curve, label=f"d_model = {d_model}, warmup_steps = {warmup}")
        peak = int(np.argmax(curve))
        ax.plot(steps[peak], curve[peak], "o", color="black", markersize=4)
        ax.annotate(f"peak {curve[peak]:.2e}\nat step {steps[peak]}", (steps[peak], curve[peak]),
                    textcoords="offset points", xytext=(8, -4), fontsize=8, va="top")
    ax.set_xlabel("training step")
    ax.set_ylabel("learning rate")
    ax.set_title("TransformerSchedule: linear warm-up, then 1/sqrt(step)")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    ax.grid(alpha=0.3)
    ax.legend()
    return figure, steps, rates


FIGURES = {
    "positional_encoding.png": lambda: positional_encoding_figure()[0],
    "learning_rate_schedule.png": lambda: learning_rate_figure()[0],
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR,
                        help=f"where to write the PNG files (default: {DEFAULT_OUTPUT_DIR})")
    args = parser.parse_args(argv)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in FIGURES.items():
        path = args.output_dir / name
        make().savefig(path, dpi=DPI)
        written.append(path)
        print(f"wrote {path}")
    return written


if __name__ == "__main__":
    main()
