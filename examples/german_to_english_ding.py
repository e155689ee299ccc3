"""German → English example sentences of the Ding dictionary, with and without attention.

    sudo apt-get install dict-freedict-deu-eng     # or: make examples-data
    .venv/bin/python examples/german_to_english_ding.py --output-dir runs/ding_de_en
    .venv/bin/python examples/german_to_english_ding.py --smoke --output-dir /tmp/ding

Data: about 12,000 German sentences with an English translation, taken from
the FreeDict German–English (Ding) dictionary that Debian packages as
`dict-freedict-deu-eng` (`kerasseq.data.freedict.load_freedict_pairs`: the
headwords that are whole sentences, cleaned). When the package is not
installed the script says so and exits with status 0.

Split (deterministic): `zlib.crc32(german) % 20` is 0 → dev (5 %, early
stopping), 1 or 2 → test (10 %, BLEU), else train.

Subwords: `kerasseq.data.WordPieceTextTokenizer` (keras-hub's WordPiece with
kerasseq's reserved ids) learns one vocabulary per language on the training
split (lower-cased, punctuation split off) and turns a sentence into pieces,
`"Ablösung"` → `["ab", "##lös", "##ung"]`. The model trains on these pieces
and `model.translate` returns readable text: the tokenizer glues the `##`
pieces back and puts the punctuation where it belongs (see docs/data.md).

Two models with the same sizes are trained on the same batches: LSTM encoder
→ GRU decoder with Bahdanau attention, and the same without attention (the
decoder sees only the bridged final encoder state, Cho et al. 2014). Both are
scored on the test split with case-insensitive sacreBLEU and chrF
(`kerasseq.evaluation`), greedy and beam search.
"""

import argparse
import json
import os
import time
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from kerasseq.data import WordPieceTextTokenizer, make_dataset  # noqa: E402
from kerasseq.data.freedict import DEFAULT_PATH, load_freedict_pairs  # noqa: E402
from kerasseq.evaluation import corpus_bleu, corpus_chrf  # noqa: E402
from kerasseq.models import build_rnn_seq2seq  # noqa: E402
from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy  # noqa: E402


def split_of(german):
    bucket = zlib.crc32(german.encode("utf-8")) % 20
    return "dev" if bucket == 0 else "test" if bucket in (1, 2) else "train"


def make_tokenizers(train_pairs, vocabulary_size):
    """One WordPiece tokenizer per language, learned on the training pairs.

    Args:
        train_pairs: `(german, english)` str pairs.
        vocabulary_size: int, ids per language including the 4 reserved ones.

    Returns:
        `(source_tokenizer, target_tokenizer)`, two `WordPieceTextTokenizer`s.
    """
    return tuple(
        WordPieceTextTokenizer.from_texts([pair[side] for pair in train_pairs], lowercase=True,
                                          max_tokens=vocabulary_size, name=name)
        for side, name in ((0, "source_tokenizer"), (1, "target_tokenizer"))
    )


def train_and_score(name, attention, args, data, tokenizers, test_pairs):
    """Train one model and score it on `test_pairs` (`(german, english)` str)."""
    keras.utils.set_random_seed(args.seed)  # the same initial weights and batches order
    source_tokenizer, target_tokenizer = tokenizers
    train_data, dev_data = data
    model = build_rnn_seq2seq(
        embedding_dim=args.embedding_dim, units=args.units, attention=attention,
        dropout=args.dropout, max_target_length=args.max_pieces + 4,
        source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer, name=name,
    )
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=1.0),
                  loss=MaskedSparseCategoricalCrossentropy(), metrics=[MaskedTokenAccuracy()])
    callbacks = [keras.callbacks.EarlyStopping(monitor="val_loss", patience=2,
                                               restore_best_weights=True)]
    started = time.time()
    history = model.fit(train_data, validation_data=dev_data, epochs=args.epochs,
                        steps_per_epoch=3 if args.smoke else None, callbacks=callbacks,
                        verbose=args.verbose)
    train_seconds = time.time() - started
    model.save(os.path.join(args.output_dir, f"{name}.keras"))

    sources = [german for german, _ in test_pairs]
    references = [english for _, english in test_pairs]
    greedy = model.translate(sources, method="greedy", batch_size=128)
    beam = model.translate(sources, method="beam", num_beams=args.num_beams, batch_size=128)
    return {
        "parameters": int(model.count_params()),
        "epochs_run": len(history.history["loss"]),
        "train_seconds": round(train_seconds, 1),
        "best_dev_loss": float(min(history.history["val_loss"])),
        "test_bleu_greedy": corpus_bleu(greedy, references, lowercase=True),
        "test_bleu_beam": corpus_bleu(beam, references, lowercase=True),
        "test_chrf_greedy": corpus_chrf(greedy, references),
        "samples": [[r, g] for r, g in list(zip(references, greedy, strict=True))[:5]],
    }


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output-dir", default="runs/german_to_english_ding")
    parser.add_argument("--dict-path", default=DEFAULT_PATH,
                        help="the FreeDict .dict.dz file (default %(default)s)")
    parser.add_argument("--vocabulary-size", type=int, default=4000,
                        help="WordPiece vocabulary per language")
    parser.add_argument("--max-pieces", type=int, default=30,
                        help="drop training pairs with more pieces on either side")
    parser.add_argument("--max-test-examples", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--embedding-dim", type=int, default=128)
    parser.add_argument("--units", type=int, default=256)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--num-beams", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", type=int, default=2, choices=[0, 1, 2])
    parser.add_argument("--smoke", action="store_true",
                        help="400 pairs, tiny models, a few steps (a test of the script)")
    return parser


def main(argv=None):
    args = make_parser().parse_args(argv)
    try:  # the smoke run reads only the first 400 pairs
        pairs = load_freedict_pairs(args.dict_path, max_pairs=400 if args.smoke else None)
    except FileNotFoundError as error:
        print(f"Skipping the German example: {error}")
        return None
    if args.smoke:
        args.vocabulary_size, args.epochs, args.embedding_dim, args.units = 300, 1, 16, 32
        args.num_beams, args.max_test_examples = 2, 16
    splits = {"train": [], "dev": [], "test": []}
    for german, english in pairs:
        splits[split_of(german)].append((german, english))
    print(f"{len(pairs):,} sentence pairs: {len(splits['train']):,} train, "
          f"{len(splits['dev']):,} dev, {len(splits['test']):,} test")

    tokenizers = make_tokenizers(splits["train"], args.vocabulary_size)
    example = [" ".join(piece.decode("utf-8") for piece in tokenizer.tokenize(text).numpy())
               for tokenizer, text in zip(tokenizers, splits["train"][0], strict=True)]
    print(f"WordPiece: {tokenizers[0].vocabulary_size} German / "
          f"{tokenizers[1].vocabulary_size} English ids; e.g. {example[0]!r} → {example[1]!r}")
    data = (
        make_dataset(splits["train"], *tokenizers, batch_size=args.batch_size, seed=args.seed,
                     bucket_boundaries="auto", max_source_length=args.max_pieces,
                     max_target_length=args.max_pieces),
        make_dataset(splits["dev"], *tokenizers, batch_size=args.batch_size, shuffle=False),
    )
    test_pairs = splits["test"][: args.max_test_examples]

    os.makedirs(args.output_dir, exist_ok=True)
    results = {"pairs": len(pairs), "train_pairs": len(splits["train"]),
               "test_pairs": len(test_pairs), "vocabulary_size": args.vocabulary_size}
    for name, attention in (("bahdanau_attention", "bahdanau"), ("no_attention", None)):
        results[name] = train_and_score(name, attention, args, data, tokenizers, test_pairs)
    with open(os.path.join(args.output_dir, "results.json"), "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=2, ensure_ascii=False)

    print(f"test split ({len(test_pairs)} pairs), case-insensitive sacreBLEU / chrF:")
    for name in ("bahdanau_attention", "no_attention"):
        scores = results[name]
        print(f"  {name:>18}: BLEU greedy {scores['test_bleu_greedy']:.1f}  "
              f"beam({args.num_beams}) {scores['test_bleu_beam']:.1f}  "
              f"chrF {scores['test_chrf_greedy']:.1f}  ({scores['parameters']:,} parameters, "
              f"{scores['epochs_run']} epochs, {scores['train_seconds'] / 60:.1f} min)")
    for reference, hypothesis in results["bahdanau_attention"]["samples"]:
        print(f"  ref {reference}\n  hyp {hypothesis}")
    return results


if __name__ == "__main__":
    main()
