"""Figures of the Transformer attention pages: the causal mask and SVO→SOV cross-attention.

    taskset -c 1 .venv/bin/python examples/plot_transformer_attention.py --output-dir docs/images
    .venv/bin/python examples/plot_transformer_attention.py --smoke --output-dir /tmp/figures

Writes two PNGs to `--output-dir`:

* `causal_mask.png` (docs/components/causal_self_attention.md): the four-token
  example of that page, computed with `attention_weights` (the masked softmax) and
  `causal_attention_mask`: the weights without a mask, the mask, and the
  weights with it.
* `cross_attention_svo_sov.png` (docs/components/cross_attention.md): a
  one-layer `build_transformer_seq2seq` model (d_model 32, 4 heads) trained on
  a synthetic reordering task, subject-verb-object sentences ("cat sees dog")
  to a made-up subject-object-verb language ("baku gomu sekta"), then the
  cross-attention of every head for a sentence the model never saw.

The task: 10 nouns and 8 verbs give 10 * 9 * 8 = 720 sentences whose subject
and object differ; a fixed 20 % of them (144) are held out and decoded
greedily to measure the exact-match accuracy, and the script also measures how
often the head-averaged cross-attention puts its largest weight on the source
word that the output word translates. The full run takes one to two minutes
on one CPU core; `--smoke` trains for a few steps only (its numbers mean
nothing).
"""

import argparse
import itertools
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from kerasseq.data import TextTokenizer, make_dataset  # noqa: E402
from kerasseq.layers.causal_self_attention import causal_attention_mask  # noqa: E402
from kerasseq.models import build_transformer_seq2seq  # noqa: E402
from kerasseq.plotting import plot_attention, plot_cross_attention_heads, save_figure  # noqa: E402
from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy  # noqa: E402

# Source word -> word of the made-up target language. Verbs end in "-ta" so
# that they are easy to spot in the figure.
NOUNS = {"cat": "baku", "dog": "gomu", "bird": "fela", "fish": "dino", "child": "hiri",
         "farmer": "kato", "teacher": "lume", "horse": "mosa", "king": "nupi", "baker": "rego"}
VERBS = {"sees": "sekta", "likes": "lomta", "feeds": "vinta", "calls": "purta",
         "follows": "zalta", "paints": "kemta", "finds": "dorta", "helps": "fista"}
EXAMPLE = "teacher follows cat"  # held out from training (checked in main)
SOURCE_POSITION_OF_OUTPUT = (0, 2, 1)  # S O V reads source words S, O, V


# ----------------------------------------------------------------- causal mask
def attention_weights(x, mask=None):
    """softmax(x xᵀ / √d_k) over the keys (Q = K = x), masked keys at weight 0:
    the masked softmax of `kerasseq.layers.MultiHeadAttention`, in float32."""
    scores = x @ np.swapaxes(x, -1, -2) / np.sqrt(x.shape[-1])
    return keras.layers.Softmax(dtype="float32")(scores, mask=mask)


def causal_mask_figure():
    """Three panels of the causal self-attention page's example (Q = K = V = x).

    The weights without a mask, the mask (a score is kept where the key is
    visible and replaced by kerasseq's fill value, -1e9, where it is not) and
    the weights with the mask; both weight panels share the colour scale 0..1.
    """
    x = np.array([[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]]]], "float32")
    # (batch_size=1, num_heads=1, target_length=4, key_dim=2)
    mask = causal_attention_mask(4, 4)[None]  # (1, 1, 4, 4)
    unmasked = attention_weights(x)
    masked = attention_weights(x, mask=mask)
    visible = np.asarray(mask)[0, 0]  # (4, 4) bool
    positions = [f"x{i}" for i in range(4)]
    figure = Figure(figsize=(10.5, 3.4), layout="constrained")
    axes = [figure.add_subplot(1, 3, index) for index in (1, 2, 3)]
    for ax, weights, title in ((axes[0], unmasked, "without mask: softmax(QKᵀ/√d_k)"),
                               (axes[2], masked, "with mask: softmax after masking")):
        plot_attention(np.asarray(weights)[0, 0], positions, positions, ax=ax, title=title,
                       annotate=True, colorbar=False)
        ax.images[0].set_clim(0.0, 1.0)
    figure.colorbar(axes[2].images[0], ax=axes[2], label="attention weight")
    axes[1].imshow(visible, cmap="Greys_r", vmin=-0.3, vmax=1.0, interpolation="nearest")
    fill = "-1e9"  # what kerasseq's masked softmax writes over a hidden score
    for (row, column), is_visible in np.ndenumerate(visible):
        label = "keep" if is_visible else fill
        axes[1].text(column, row, label, ha="center", va="center", fontsize=9,
                     color="black" if is_visible else "white")
    axes[1].set_xticks(range(4), positions)
    axes[1].set_yticks(range(4), positions)
    axes[1].set_title(f"mask: score → {fill} where j > i")
    for ax in axes:
        ax.set_xlabel("key position j")
        ax.set_ylabel("query position i")
    return figure


# ------------------------------------------------------------- SVO -> SOV toy
def make_pairs():
    """All 720 `(source "S V O", target "S' O' V'")` pairs with subject != object."""
    pairs = []
    for subject, obj in itertools.permutations(NOUNS, 2):
        for verb in VERBS:
            source = f"{subject} {verb} {obj}"
            target = f"{NOUNS[subject]} {NOUNS[obj]} {VERBS[verb]}"
            pairs.append((source, target))
    return pairs


def split_pairs(pairs, test_fraction=0.2, seed=0):
    """A fixed random split; `EXAMPLE` always lands in the test part."""
    order = np.random.default_rng(seed).permutation(len(pairs))
    test_count = int(round(test_fraction * len(pairs)))
    test = [pairs[i] for i in order[:test_count]]
    train = [pairs[i] for i in order[test_count:]]
    for index, pair in enumerate(train):
        if pair[0] == EXAMPLE:  # swap it with a test pair
            train[index], test[0] = test[0], pair
    return train, test


def train_model(train_pairs, args):
    """Build, compile and fit the one-layer Transformer; return it and its tokenizers."""
    keras.utils.set_random_seed(args.seed)
    source_tokenizer = TextTokenizer.from_texts([s for s, _ in train_pairs], split="whitespace")
    target_tokenizer = TextTokenizer.from_texts([t for _, t in train_pairs], split="whitespace")
    model = build_transformer_seq2seq(
        num_layers=args.num_layers, d_model=args.d_model, num_heads=args.num_heads,
        dff=2 * args.d_model, dropout=0.0, max_positions=8,
        source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer,
    )
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=1.0),
                  loss=MaskedSparseCategoricalCrossentropy(),
                  metrics=[MaskedTokenAccuracy()])
    dataset = make_dataset(train_pairs, source_tokenizer, target_tokenizer,
                           batch_size=args.batch_size, seed=args.seed)
    start = time.perf_counter()
    history = model.fit(dataset, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch,
                        verbose=2 if args.verbose else 0)
    return model, history, time.perf_counter() - start


def teacher_forced_ids(model, pairs):
    """`(source_ids, target_in_ids)` int32 arrays, each `(len(pairs), 3)` / `(len(pairs), 4)`."""
    source_ids = model.source_tokenizer.encode([s for s, _ in pairs]).to_tensor().numpy()
    target_ids = model.target_tokenizer.encode([t for _, t in pairs]).to_tensor().numpy()
    start = np.full((len(pairs), 1), model.start_id, "int32")
    return source_ids, np.concatenate([start, target_ids], axis=1)


def alignment_accuracy(model, pairs):
    """Share of content rows whose head-averaged cross-attention peaks on the aligned word."""
    source_ids, target_in_ids = teacher_forced_ids(model, pairs)
    weights = np.asarray(model.teacher_forced_attention(source_ids, target_in_ids))
    # (num_pairs, target_length=4, source_length=3); rows 0..2 produce S', O', V'
    peaks = weights[:, :3].argmax(axis=-1)  # (num_pairs, 3)
    return float(np.mean(peaks == np.array(SOURCE_POSITION_OF_OUTPUT)))


def cross_attention_figure(model, source, target):
    """One heatmap per head of the last decoder layer for one sentence pair."""
    source_ids, target_in_ids = teacher_forced_ids(model, [(source, target)])
    weights = np.asarray(model.cross_attention_weights(source_ids, target_in_ids))[0]
    # (num_heads, target_length=4, source_length=3)
    output_tokens = [*target.split(), "[END]"]  # row t predicts target_out[t]
    return plot_cross_attention_heads(
        weights, source.split(), output_tokens, ncols=2,
        title=f"cross-attention, '{source}' → '{target}' (held out)",
    )


# ------------------------------------------------------------------------ CLI
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output-dir", default="docs/images")
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--steps-per-epoch", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--num-layers", type=int, default=1)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--num-heads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="print one line per epoch")
    parser.add_argument("--smoke", action="store_true",
                        help="a few training steps only, to check that the script runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs, args.steps_per_epoch = 1, 5
    return args


def main(argv=None):
    """Make both figures; return a summary dict (accuracy, timing, file paths)."""
    args = parse_args(argv)
    paths = {"causal_mask": os.path.join(args.output_dir, "causal_mask.png"),
             "cross_attention": os.path.join(args.output_dir, "cross_attention_svo_sov.png")}
    save_figure(causal_mask_figure(), paths["causal_mask"], dpi=100)

    train_pairs, test_pairs = split_pairs(make_pairs())
    assert EXAMPLE not in {source for source, _ in train_pairs}
    model, history, seconds = train_model(train_pairs, args)
    predictions = model.translate([source for source, _ in test_pairs])
    exact_match = float(np.mean([p == t for p, (_, t) in zip(predictions, test_pairs, strict=True)]))
    example = next(pair for pair in test_pairs if pair[0] == EXAMPLE)
    save_figure(cross_attention_figure(model, *example), paths["cross_attention"], dpi=100)
    summary = {
        "train_pairs": len(train_pairs),
        "test_pairs": len(test_pairs),
        "parameters": model.count_params(),
        "epochs": args.epochs,
        "training_seconds": round(seconds, 1),
        "final_train_loss": round(float(history.history["loss"][-1]), 4),
        "test_exact_match": exact_match,
        "test_alignment_accuracy": alignment_accuracy(model, test_pairs),
        "example": {"source": example[0], "reference": example[1],
                    "prediction": model.translate(example[0])},
        "figures": paths,
    }
    for key, value in summary.items():
        print(f"{key}: {value}")
    return summary


if __name__ == "__main__":
    main()
