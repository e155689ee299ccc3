"""The information bottleneck: a context-vector model versus attention, by source length.

    taskset -c 0 .venv/bin/python examples/information_bottleneck.py --output-dir runs/bottleneck
    .venv/bin/python examples/information_bottleneck.py --smoke --output-dir /tmp/bottleneck

The task is synthetic and needs every source token: reverse a random string
of lower-case letters, `"abcde"` → `"e d c b a"` (a character tokenizer for
the source, a whitespace tokenizer for the target, so both sides have one
token per letter). Lengths are uniform in 2..30; the train and test sets are
drawn with a fixed seed (test strings never occur in the training set).

Two `build_rnn_seq2seq` models get the same budget (epochs, batch size,
optimizer `Adam(2e-3, clipnorm=1.0)`, masked cross-entropy, length-bucketed
batches) and differ only in `attention`:

* `attention=None`: Cho et al.'s (2014) context-vector model; the decoder sees
  the source only through one fixed vector of `units` numbers;
* `attention="bahdanau"`: Bahdanau et al. (2014); every step reads all
  encoder outputs.

Both are scored with greedy decoding on the test set, per source-length bucket
(`kerasseq.evaluation.scores_by_length`): the exact-match accuracy (1 - WER,
where a "word" is a whole string) and the character error rate (the PER of
`g2p_error_rates`: edit distance over letters / reference letters). The script
prints a table and writes `results.json` and `bottleneck_by_length.png` (exact
match by length, both models) to `--output-dir`.
"""

import argparse
import json
import os
import string
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from kerasseq.data import TextTokenizer, make_dataset  # noqa: E402
from kerasseq.evaluation import g2p_error_rates, scores_by_length  # noqa: E402
from kerasseq.models import build_rnn_seq2seq  # noqa: E402
from kerasseq.plotting import plot_scores_by_length, save_figure  # noqa: E402
from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy  # noqa: E402

BUCKETS = (2, 6, 10, 14, 18, 22, 26)
ALPHABET = string.ascii_lowercase
MODELS = {"context vector (attention=None)": None, "Bahdanau attention": "bahdanau"}


def reverse_target(source):
    """The target of a source string: its letters reversed, space-separated."""
    return " ".join(reversed(source))


def make_pairs(count, min_length=2, max_length=30, seed=0, exclude=()):
    """`count` distinct `(source, reversed target)` pairs of random letter strings.

    Lengths are uniform in `min_length..max_length`; sources in `exclude` are
    skipped (so a test set can avoid the training strings).
    """
    rng = np.random.default_rng(seed)
    excluded, pairs = set(exclude), []
    while len(pairs) < count:
        length = int(rng.integers(min_length, max_length + 1))
        source = "".join(rng.choice(list(ALPHABET), size=length))
        if source in excluded:
            continue
        excluded.add(source)
        pairs.append((source, reverse_target(source)))
    return pairs


def train_and_score(attention, train_pairs, test_pairs, source_tokenizer, target_tokenizer, args,
                    steps_per_epoch=None):
    """Train one model with the shared budget; return its scores and bookkeeping."""
    keras.utils.set_random_seed(args.seed)
    model = build_rnn_seq2seq(
        embedding_dim=args.embedding_dim, units=args.units, attention=attention,
        max_target_length=args.max_length + 2, source_tokenizer=source_tokenizer,
        target_tokenizer=target_tokenizer,
    )
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=1.0),
                  loss=MaskedSparseCategoricalCrossentropy(), metrics=[MaskedTokenAccuracy()])
    train_data = make_dataset(train_pairs, source_tokenizer, target_tokenizer,
                              batch_size=args.batch_size, seed=args.seed, bucket_boundaries="auto")
    started = time.time()
    history = model.fit(train_data, epochs=args.epochs, steps_per_epoch=steps_per_epoch,
                        verbose=args.verbose)
    train_seconds = time.time() - started

    sources = [source for source, _ in test_pairs]
    references = [target for _, target in test_pairs]
    started = time.time()
    hypotheses = model.translate(sources, method="greedy", batch_size=256)
    decode_seconds = time.time() - started
    overall = g2p_error_rates(hypotheses, references)
    by_length = {
        metric: scores_by_length(sources, hypotheses, references, buckets=BUCKETS, metric=metric)
        for metric in ("wer", "per")
    }
    return {
        "attention": attention,
        "parameters": int(model.count_params()),
        "train_seconds": round(train_seconds, 1),
        "decode_seconds": round(decode_seconds, 1),
        "final_train_loss": float(history.history["loss"][-1]),
        "exact_match": 1.0 - overall["wer"],
        "character_error_rate": overall["per"],
        "by_length": [
            {"bucket": wer_row["bucket"], "count": wer_row["count"],
             "exact_match": None if wer_row["score"] is None else 1.0 - wer_row["score"],
             "character_error_rate": per_row["score"]}
            for wer_row, per_row in zip(by_length["wer"], by_length["per"], strict=True)
        ],
        "wer_by_length": by_length["wer"],
        "examples": [[s, r, h] for s, r, h in
                     sorted(zip(sources, references, hypotheses, strict=True),
                            key=lambda example: -len(example[0]))[:3]],
    }


def format_table(results):
    """A markdown table: exact match and CER per length bucket, one column pair per model."""
    names = list(results)
    header = "| source length | test strings | " + " | ".join(
        f"{name}: exact match | {name}: CER" for name in names) + " |"
    lines = [header, "|" + "---|" * (2 + 2 * len(names))]
    buckets = results[names[0]]["by_length"]
    for index, row in enumerate(buckets):
        cells = [row["bucket"], str(row["count"])]
        for name in names:
            cell = results[name]["by_length"][index]
            if cell["exact_match"] is None:
                cells += ["–", "–"]
            else:
                cells += [f"{cell['exact_match']:.1%}", f"{cell['character_error_rate']:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    cells = ["all", str(sum(row["count"] for row in buckets))]
    for name in names:
        cells += [f"{results[name]['exact_match']:.1%}",
                  f"{results[name]['character_error_rate']:.3f}"]
    lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output-dir", default="runs/information_bottleneck")
    parser.add_argument("--train-size", type=int, default=20_000)
    parser.add_argument("--test-size", type=int, default=2_000)
    parser.add_argument("--max-length", type=int, default=30, help="longest source string")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--embedding-dim", type=int, default=32)
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", type=int, default=2, choices=[0, 1, 2])
    parser.add_argument("--smoke", action="store_true",
                        help="tiny models, 3 steps each, 64 test strings (a test of the script)")
    return parser


def main(argv=None):
    args = make_parser().parse_args(argv)
    steps_per_epoch = None
    if args.smoke:
        args.train_size, args.test_size, args.epochs = 256, 64, 1
        args.embedding_dim, args.units, args.verbose = 8, 16, 0
        steps_per_epoch = 3
    train_pairs = make_pairs(args.train_size, max_length=args.max_length, seed=args.seed)
    test_pairs = make_pairs(args.test_size, max_length=args.max_length, seed=args.seed + 1,
                            exclude=[source for source, _ in train_pairs])
    print(f"{len(train_pairs)} train / {len(test_pairs)} test pairs, e.g. {test_pairs[0]}")
    # Fixed vocabularies (all 26 letters), whatever strings were drawn.
    source_tokenizer = TextTokenizer.from_texts([ALPHABET], split="character",
                                                name="source_tokenizer")
    target_tokenizer = TextTokenizer.from_texts([" ".join(ALPHABET)], split="whitespace",
                                                name="target_tokenizer")

    results = {}
    for name, attention in MODELS.items():
        print(f"--- {name}")
        results[name] = train_and_score(attention, train_pairs, test_pairs, source_tokenizer,
                                        target_tokenizer, args, steps_per_epoch)
        print(f"{results[name]['parameters']:,} parameters, trained in "
              f"{results[name]['train_seconds']:.0f} s: exact match "
              f"{results[name]['exact_match']:.1%}, CER {results[name]['character_error_rate']:.3f}")

    os.makedirs(args.output_dir, exist_ok=True)
    figure = plot_scores_by_length(
        {name: [(row["bucket"], row["exact_match"]) for row in result["by_length"]]
         for name, result in results.items()},
        title=f"Reversing letter strings: same budget ({args.epochs} epochs), greedy decoding",
        ylabel="exact match (test)", xlabel="source length (letters)",
    )
    figure_path = save_figure(figure, os.path.join(args.output_dir, "bottleneck_by_length.png"))
    table = format_table(results)
    summary = {
        "task": "reverse random lower-case letter strings",
        "train_pairs": len(train_pairs),
        "test_pairs": len(test_pairs),
        "buckets": list(BUCKETS),
        "settings": {key: getattr(args, key) for key in
                     ("max_length", "epochs", "batch_size", "embedding_dim", "units",
                      "learning_rate", "seed", "smoke")},
        "models": results,
        "table": table,
        "figure": figure_path,
    }
    with open(os.path.join(args.output_dir, "results.json"), "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2)
    print(table)
    for name, result in results.items():
        for source, reference, hypothesis in result["examples"][:1]:
            print(f"{name}: {source!r}\n    ref {reference}\n    hyp {hypothesis}")
    print(f"figure: {figure_path}")
    return summary


if __name__ == "__main__":
    main()
