"""Portuguese → English on TED talk transcripts from TensorFlow Datasets.

    .venv/bin/python examples/tfds_translate.py --output-dir runs/tfds_pt_en
    .venv/bin/python examples/tfds_translate.py --smoke --mock-data --output-dir /tmp/tfds

Data: `ted_hrlr_translate/pt_to_en` (Qi et al. 2018, ~51k train / 1.2k
validation / 1.8k test sentence pairs, lower-cased and tokenized by the
dataset's authors), loaded with `tfds.load(..., as_supervised=True)` as
`(portuguese, english)` `tf.string` pairs. The first run downloads the data
(about 125 MB) into `--data-dir` (default `~/tensorflow_datasets`), so it needs
internet access; later runs read the prepared TFRecords.

Pipeline: bytes are decoded to Python `str` (UTF-8), pairs with more than
`--max-words` words on either side are dropped, word-level `TextTokenizer`s
(`split="word"`, lower-cased, the `--max-vocab` most frequent words, the rest
`[UNK]`) are built on the training split, and an LSTM encoder + GRU decoder
with Bahdanau attention is trained with teacher forcing. The script reports
sacreBLEU / chrF on `--eval-examples` validation pairs with greedy and beam
search, and the test split once with `--evaluate-test`.

Offline: `--mock-data` (and the smoke test in `tests/test_examples.py`) wraps
loading in `tfds.testing.mock_data`, which generates random strings from the
dataset's feature spec instead of downloading. tensorflow-datasets 4.9.10 does
not ship `dataset_info.json` for this dataset, so the mock falls back to the
builder's code (`MockPolicy.USE_CODE`, chosen explicitly here); that needs no
network and no `data_dir`. Random strings make the BLEU of a mock run
meaningless: it only shows that the pipeline runs end to end.
"""

import argparse
import contextlib
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from kerasseq.data import TextTokenizer, make_dataset  # noqa: E402
from kerasseq.data.tfds import load_tfds_pairs  # noqa: E402
from kerasseq.evaluation import corpus_bleu, corpus_chrf  # noqa: E402
from kerasseq.models import build_rnn_seq2seq  # noqa: E402
from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy  # noqa: E402

DATASET = "ted_hrlr_translate/pt_to_en"


def load_pairs(split, data_dir=None, limit=None, max_words=None, dataset=DATASET):
    """`(source, target)` str pairs of one TFDS split (see `load_tfds_pairs`)."""
    return load_tfds_pairs(dataset, split, data_dir=data_dir, limit=limit, max_words=max_words)


@contextlib.contextmanager
def maybe_mock_data(enabled, num_examples):
    """`tfds.testing.mock_data` (random examples from the feature spec) when enabled."""
    if not enabled:
        yield
        return
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=num_examples,
                                policy=tfds.testing.MockPolicy.USE_CODE):
        yield


def evaluate(model, pairs, num_beams):
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    greedy = model.translate(sources, method="greedy", batch_size=128)
    beam = model.translate(sources, method="beam", num_beams=num_beams, batch_size=128)
    return {
        "examples": len(pairs),
        "bleu_greedy": corpus_bleu(greedy, references),
        "bleu_beam": corpus_bleu(beam, references),
        "chrf_greedy": corpus_chrf(greedy, references),
        "samples": [[s, r, h] for s, r, h in list(zip(sources, references, greedy, strict=True))[:3]],
    }


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output-dir", default="runs/tfds_translate")
    parser.add_argument("--dataset", default=DATASET,
                        help="a supervised TFDS translation dataset (default %(default)s)")
    parser.add_argument("--data-dir", default=None, help="TFDS data directory")
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--eval-examples", type=int, default=500)
    parser.add_argument("--max-words", type=int, default=40)
    parser.add_argument("--max-vocab", type=int, default=8000)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--embedding-dim", type=int, default=128)
    parser.add_argument("--units", type=int, default=256)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--num-beams", type=int, default=4)
    parser.add_argument("--evaluate-test", action="store_true",
                        help="also score the test split (do this once, at the end)")
    parser.add_argument("--mock-data", action="store_true",
                        help="random examples from tfds.testing.mock_data (offline)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", type=int, default=2, choices=[0, 1, 2])
    parser.add_argument("--smoke", action="store_true",
                        help="tiny model, 64 training pairs, a few steps (a test of the script)")
    return parser


def main(argv=None):
    args = make_parser().parse_args(argv)
    if args.smoke:
        args.max_train_examples, args.eval_examples = 64, 8
        args.epochs, args.embedding_dim, args.units, args.num_beams = 1, 16, 32, 2
        args.max_vocab = 500
    keras.utils.set_random_seed(args.seed)
    with maybe_mock_data(args.mock_data, num_examples=max(args.max_train_examples or 0, 64)):
        train_pairs = load_pairs("train", args.data_dir, args.max_train_examples,
                                 args.max_words, args.dataset)
        dev_pairs = load_pairs("validation", args.data_dir, args.eval_examples,
                               args.max_words, args.dataset)
        test_pairs = (load_pairs("test", args.data_dir, None, None, args.dataset)
                      if args.evaluate_test else None)
    print(f"{len(train_pairs)} train / {len(dev_pairs)} validation pairs; e.g. {train_pairs[0]}")

    tokenizer_args = dict(split="word", lowercase=True, max_tokens=args.max_vocab)
    source_tokenizer = TextTokenizer.from_texts([s for s, _ in train_pairs], name="source_tokenizer",
                                                **tokenizer_args)
    target_tokenizer = TextTokenizer.from_texts([t for _, t in train_pairs], name="target_tokenizer",
                                                **tokenizer_args)
    model = build_rnn_seq2seq(
        embedding_dim=args.embedding_dim, units=args.units, attention="bahdanau",
        dropout=args.dropout, max_target_length=args.max_words + 8,
        source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer,
    )
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=1.0),
                  loss=MaskedSparseCategoricalCrossentropy(), metrics=[MaskedTokenAccuracy()])
    train_data = make_dataset(train_pairs, source_tokenizer, target_tokenizer,
                              batch_size=args.batch_size, seed=args.seed,
                              bucket_boundaries=None if args.smoke else "auto")
    dev_data = make_dataset(dev_pairs, source_tokenizer, target_tokenizer,
                            batch_size=args.batch_size, shuffle=False)
    if args.smoke:  # 3 batches per epoch (take keeps the dataset's known length)
        train_data = train_data.take(3)
    started = time.time()
    history = model.fit(train_data, validation_data=dev_data, epochs=args.epochs,
                        verbose=args.verbose)
    train_seconds = time.time() - started

    results = {
        "dataset": args.dataset + (" (tfds.testing.mock_data)" if args.mock_data else ""),
        "train_pairs": len(train_pairs),
        "parameters": int(model.count_params()),
        "epochs": args.epochs,
        "train_seconds": round(train_seconds, 1),
        "final_dev_loss": float(history.history["val_loss"][-1]),
        "validation": evaluate(model, dev_pairs, args.num_beams),
    }
    if test_pairs is not None:
        results["test"] = evaluate(model, test_pairs, args.num_beams)
    os.makedirs(args.output_dir, exist_ok=True)
    model.save(os.path.join(args.output_dir, "model.keras"))
    with open(os.path.join(args.output_dir, "results.json"), "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=2, ensure_ascii=False)

    print(f"parameters {results['parameters']:,}  train {train_seconds:.0f} s")
    for split in ("validation", "test"):
        if split in results:
            scores = results[split]
            print(f"{split} ({scores['examples']} pairs): BLEU greedy {scores['bleu_greedy']:.1f}  "
                  f"beam({args.num_beams}) {scores['bleu_beam']:.1f}  chrF {scores['chrf_greedy']:.1f}")
    for source, reference, hypothesis in results["validation"]["samples"]:
        print(f"  {source}\n    ref {reference}\n    hyp {hypothesis}")
    return results


if __name__ == "__main__":
    main()
