"""English number words → Bengali number words with an RNN + Bahdanau attention.

    .venv/bin/python examples/english_to_bengali_numbers.py --output-dir runs/numbers_bn
    .venv/bin/python examples/english_to_bengali_numbers.py --smoke --output-dir /tmp/numbers

The pairs are generated with `num2words` (no download): for n = 0..9999,
`num2words(n, lang="en")` → `num2words(n, lang="bn")`, e.g.

    "one thousand, nine hundred and ninety-nine" → "এক হাজার নয়শত নিরানব্বই"

A toy task with real structure: Bengali has one word for every number from 0
to 99 (`নিরানব্বই` = ninety-nine, `একুশ` = twenty-one), so several English
tokens (`ninety - nine`) align to one Bengali word, and `hundred` / `and`
have no Bengali counterpart of their own (`নয়শত` = nine hundred).

Split (deterministic): `zlib.crc32(str(n)) % 10` is 8 → dev, 9 → test, else
train (about 80/10/10). A rule on `n % k` would be a bad choice: with any `k`
dividing 100 every number ending in, say, 19 would land in the same split, and
the Bengali word for 19 would never be seen in training.

Both tokenizers are word-level (`TextTokenizer(split="word")`: punctuation
such as `,` and `-` are tokens of their own). The script trains, then reports
on the dev split: exact-match accuracy (greedy and beam search), sacreBLEU and
chrF, and saves an attention heatmap for one dev number (`attention.png`),
plus `results.json` and `model.keras` in `--output-dir`.
"""

import argparse
import json
import os
import time
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from num2words import num2words  # noqa: E402

from kerasseq.data import TextTokenizer, make_dataset  # noqa: E402
from kerasseq.evaluation import corpus_bleu, corpus_chrf  # noqa: E402
from kerasseq.models import build_rnn_seq2seq  # noqa: E402
from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy  # noqa: E402


def split_of(number):
    """"train", "dev" or "test" for an integer, by a CRC32 hash of its digits."""
    bucket = zlib.crc32(str(number).encode("ascii")) % 10
    return {8: "dev", 9: "test"}.get(bucket, "train")


def make_pairs(split, target_language="bn", limit=10_000):
    """`(english, target)` number-word pairs of one split, numbers 0..limit-1 in order."""
    return [
        (num2words(number, lang="en"), num2words(number, lang=target_language))
        for number in range(limit)
        if split_of(number) == split
    ]


def exact_match(hypotheses, references):
    """Fraction of hypotheses equal to their reference (whitespace-normalized)."""
    matches = [" ".join(h.split()) == " ".join(r.split()) for h, r in zip(hypotheses, references, strict=True)]
    return float(np.mean(matches))


def save_attention_heatmap(model, source_text, path):
    """Decode `source_text` greedily and plot the teacher-forced attention of that output."""
    translation = model.translate([source_text])[0]
    source_tokenizer, target_tokenizer = model.source_tokenizer, model.target_tokenizer
    source_ids = source_tokenizer.encode([source_text]).to_tensor()  # (1, source_length)
    target_ids = target_tokenizer.encode([translation]).to_tensor()  # (1, target_length)
    target_in = np.concatenate([[[target_tokenizer.start_id]], target_ids.numpy()], axis=1)
    weights = np.asarray(model.teacher_forced_attention(source_ids, target_in))[0]
    # (target_length + 1, source_length): row t produced output token t (the last one [END])
    source_tokens = [t.decode() for t in source_tokenizer.tokenize(source_text).numpy()]
    target_tokens = [t.decode() for t in target_tokenizer.tokenize(translation).numpy()] + ["[END]"]
    try:
        from kerasseq.plotting import plot_attention, save_figure
    except ImportError:  # kerasseq without the plotting module: plain matplotlib
        from matplotlib.figure import Figure

        figure = Figure(figsize=(1 + 0.5 * len(source_tokens), 1 + 0.4 * len(target_tokens)))
        ax = figure.add_subplot()
        ax.imshow(weights, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(source_tokens)), source_tokens, rotation=90)
        ax.set_yticks(range(len(target_tokens)), target_tokens)
        figure.tight_layout()
        figure.savefig(path, dpi=150)
    else:
        figure = plot_attention(weights, source_tokens, target_tokens,
                                title=f"{source_text} → {translation}")
        save_figure(figure, path)
    return translation


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output-dir", default="runs/english_to_bengali_numbers")
    parser.add_argument("--language", default="bn",
                        help="num2words target language (default bn = Bengali)")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--embedding-dim", type=int, default=64)
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--num-beams", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", type=int, default=2, choices=[0, 1, 2])
    parser.add_argument("--smoke", action="store_true",
                        help="tiny model, 1 short epoch, 32 dev examples (a test of the script)")
    return parser


def main(argv=None):
    args = make_parser().parse_args(argv)
    keras.utils.set_random_seed(args.seed)
    train_pairs = make_pairs("train", args.language)
    dev_pairs = make_pairs("dev", args.language)
    steps_per_epoch = None
    if args.smoke:
        train_pairs, dev_pairs = train_pairs[::16], dev_pairs[::32]
        args.epochs, args.embedding_dim, args.units, args.num_beams = 1, 16, 32, 2
        steps_per_epoch = 5
    print(f"{len(train_pairs)} train / {len(dev_pairs)} dev pairs, e.g. {dev_pairs[-1]}")

    source_tokenizer = TextTokenizer.from_texts([s for s, _ in train_pairs], split="word",
                                                name="source_tokenizer")
    target_tokenizer = TextTokenizer.from_texts([t for _, t in train_pairs], split="word",
                                                name="target_tokenizer")
    model = build_rnn_seq2seq(
        embedding_dim=args.embedding_dim, units=args.units, attention="bahdanau",
        max_target_length=24, source_tokenizer=source_tokenizer,
        target_tokenizer=target_tokenizer,
    )
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=1.0),
                  loss=MaskedSparseCategoricalCrossentropy(), metrics=[MaskedTokenAccuracy()])
    train_data = make_dataset(train_pairs, source_tokenizer, target_tokenizer,
                              batch_size=args.batch_size, seed=args.seed)
    dev_data = make_dataset(dev_pairs, source_tokenizer, target_tokenizer,
                            batch_size=args.batch_size, shuffle=False)
    started = time.time()
    history = model.fit(train_data, validation_data=dev_data, epochs=args.epochs,
                        steps_per_epoch=steps_per_epoch, verbose=args.verbose)
    train_seconds = time.time() - started

    sources = [s for s, _ in dev_pairs]
    references = [t for _, t in dev_pairs]
    started = time.time()
    greedy = model.translate(sources, method="greedy", batch_size=256)
    beam = model.translate(sources, method="beam", num_beams=args.num_beams, batch_size=256)
    decode_seconds = time.time() - started

    os.makedirs(args.output_dir, exist_ok=True)
    example = next((s for s in sources if "thousand" in s and "hundred" in s), sources[0])
    heatmap_path = os.path.join(args.output_dir, "attention.png")
    example_translation = save_attention_heatmap(model, example, heatmap_path)
    model.save(os.path.join(args.output_dir, "model.keras"))

    results = {
        "language": args.language,
        "train_pairs": len(train_pairs),
        "dev_pairs": len(dev_pairs),
        "parameters": int(model.count_params()),
        "epochs": args.epochs,
        "train_seconds": round(train_seconds, 1),
        "decode_seconds": round(decode_seconds, 1),
        "final_train_loss": float(history.history["loss"][-1]),
        "final_dev_loss": float(history.history["val_loss"][-1]),
        "dev_exact_match_greedy": exact_match(greedy, references),
        "dev_exact_match_beam": exact_match(beam, references),
        "dev_bleu_greedy": corpus_bleu(greedy, references),
        "dev_bleu_beam": corpus_bleu(beam, references),
        "dev_chrf_greedy": corpus_chrf(greedy, references),
        "num_beams": args.num_beams,
        "heatmap": heatmap_path,
        "heatmap_example": [example, example_translation],
        "examples": [[s, r, g] for s, r, g in list(zip(sources, references, greedy, strict=True))[:5]],
    }
    with open(os.path.join(args.output_dir, "results.json"), "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=2, ensure_ascii=False)
    print(f"parameters {results['parameters']:,}  train {train_seconds:.0f} s  "
          f"decode (greedy + beam) {decode_seconds:.0f} s")
    print(f"dev exact match: greedy {results['dev_exact_match_greedy']:.2%}  "
          f"beam({args.num_beams}) {results['dev_exact_match_beam']:.2%}")
    print(f"dev BLEU: greedy {results['dev_bleu_greedy']:.1f}  beam {results['dev_bleu_beam']:.1f}  "
          f"chrF (greedy) {results['dev_chrf_greedy']:.1f}")
    for source, reference, hypothesis in results["examples"]:
        print(f"  {source!r}\n    ref {reference}\n    hyp {hypothesis}")
    print(f"attention heatmap of {example!r} → {example_translation!r}: {heatmap_path}")
    return results


if __name__ == "__main__":
    main()
