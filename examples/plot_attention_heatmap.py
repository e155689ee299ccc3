"""Train a tiny attention model to reverse letter strings and plot where it looks.

Produces docs/images/attention_reverse.png, the figure of
docs/components/bahdanau_attention.md. About a minute on two CPU cores:

    python examples/plot_attention_heatmap.py [--output docs/images/attention_reverse.png]
    python examples/plot_attention_heatmap.py --smoke --output /tmp/attention.png

Reversal is a task whose correct alignment is known in advance (target
position t must read source position S + 1 - t), so the heatmap shows at a
glance whether the attention learned it: an anti-diagonal. `--smoke` trains
for a few steps on a few pairs only (the figure then means nothing); the test
suite runs it.
"""

import argparse

import keras
import numpy as np

from kerasseq.models import build_rnn_seq2seq
from kerasseq.plotting import plot_attention, save_figure
from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy

LETTERS = "abcdefghij"
START, END, FIRST_LETTER_ID = 2, 3, 4


def make_pairs(count, rng, min_length=4, max_length=9):
    """`(source_ids, target_in_ids, target_out_ids)` padded with 0."""
    source = np.zeros((count, max_length), "int32")
    target_in = np.zeros((count, max_length + 1), "int32")
    target_out = np.zeros((count, max_length + 1), "int32")
    for row in range(count):
        length = rng.integers(min_length, max_length + 1)
        ids = rng.integers(FIRST_LETTER_ID, FIRST_LETTER_ID + len(LETTERS), size=length)
        source[row, :length] = ids
        target_in[row, : length + 1] = [START, *ids[::-1]]
        target_out[row, : length + 1] = [*ids[::-1], END]
    return source, target_in, target_out


def main(argv=None):
    """Train, plot, save; return the path of the figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="docs/images/attention_reverse.png")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--smoke", action="store_true",
                        help="one epoch on 128 pairs, to check that the script runs")
    args = parser.parse_args(argv)
    num_pairs = 128 if args.smoke else 4000
    epochs = 1 if args.smoke else args.epochs

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    vocab_size = FIRST_LETTER_ID + len(LETTERS)
    model = build_rnn_seq2seq(vocab_size, vocab_size, embedding_dim=16, units=48,
                              attention="bahdanau", bidirectional=False)
    model.compile(optimizer=keras.optimizers.Adam(3e-3, global_clipnorm=1.0),
                  loss=MaskedSparseCategoricalCrossentropy(),
                  metrics=[MaskedTokenAccuracy()])
    source, target_in, target_out = make_pairs(num_pairs, rng)
    model.fit([source, target_in], target_out, batch_size=64, epochs=epochs, verbose=2)

    word = "badjeicg"
    source_ids = np.array([[FIRST_LETTER_ID + LETTERS.index(c) for c in word]], "int32")
    target_in_ids = np.array([[START, *source_ids[0, ::-1]]], "int32")
    weights = np.asarray(model.teacher_forced_attention(source_ids, target_in_ids))[0]
    # (target_length, source_length): row t = where the decoder looked to predict token t
    figure = plot_attention(weights, list(word), [*word[::-1], "[END]"],
                            title=f"Bahdanau attention, reversing '{word}'")
    path = save_figure(figure, args.output)
    print("saved", path)
    return path


if __name__ == "__main__":
    main()
