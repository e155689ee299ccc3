"""Teach a frozen Spanish → English Transformer to align: a shifted alignment head.

    .venv/bin/python examples/bible_alignment_head.py \
        --model runs/bible_shared_guided/transformer_guided \
        --output-dir runs/bible_shared_guided/alignment_head
    .venv/bin/python examples/bible_alignments.py --split dev \
        --model transformer_guided=runs/bible_shared_guided/transformer_guided \
        --alignment-head transformer_guided=runs/bible_shared_guided/alignment_head/alignment_head.keras \
        --output-dir runs/bible_shared_guided/alignment_head/dev
    .venv/bin/python examples/bible_alignment_head.py --smoke --output-dir /tmp/bible_alignment_head

The model (`--model`: a `.keras` file, or a model's folder of
examples/spanish_to_english_bible.py, as `bible_alignments.py` reads it) is
not changed: `kerasseq.alignment.train_alignment_head` trains a
`ShiftedAlignmentHead` over its decoder layer `--layer`'s cross-attention
inputs, reading target piece t at the position fed piece t (`--shift 1`),
against eflomal's links of the *training* verses
(`kerasseq.alignment.reference_alignments`, grow-diag-final-and, cached in
`--links-cache`); dev and test verses are never read here. Score the head
with `bible_alignments.py --alignment-head` (dev first).

Writes under OUTPUT_DIR: alignment_head.keras (written atomically; load with
`keras.models.load_model` after `import kerasseq`), alignment_head.json (the
arguments, the loss of each epoch, the seconds, the model file).
`--smoke` trains a head for one epoch on 300 training verses over a tiny
untrained model, saved beside it as smoke_transformer.keras (a test of the
script).
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from kerasseq._files import replace_atomically  # noqa: E402
from kerasseq.alignment import reference_alignments, train_alignment_head  # noqa: E402
from kerasseq.data.sword import SwordError, load_bible_pairs  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bible_alignments import model_path  # noqa: E402


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None,
                        help="a trained .keras model, or a model's folder written by "
                             "spanish_to_english_bible.py (required unless --smoke)")
    parser.add_argument("--output-dir", default="runs/bible_alignment_head")
    parser.add_argument("--links-cache", default=None,
                        help="the .npz cache of eflomal's piece links of the training verses "
                             "(default: OUTPUT_DIR/reference_links.npz; the guided run's "
                             "reference_links.npz is the same when the tokenizers are)")
    parser.add_argument("--layer", type=int, default=0)
    parser.add_argument("--shift", type=int, default=1, choices=[0, 1])
    parser.add_argument("--key-dim", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true")
    return parser


def tiny_model(pairs):
    from kerasseq.data import WordPieceTextTokenizer
    from kerasseq.models import build_transformer_seq2seq

    return build_transformer_seq2seq(
        num_layers=2, d_model=16, num_heads=2, dff=16, max_positions=256,
        source_tokenizer=WordPieceTextTokenizer.from_texts(
            [p.source for p in pairs], max_tokens=300, lowercase=True),
        target_tokenizer=WordPieceTextTokenizer.from_texts([p.target for p in pairs],
                                                           max_tokens=300))


def main(argv=None):
    args = make_parser().parse_args(argv)
    if not args.smoke and not args.model:
        raise SystemExit("--model is required (a .keras file or a model's folder)")
    try:
        pairs = load_bible_pairs()
    except SwordError as error:
        print(f"Skipping the alignment-head example: {error}")
        return None
    train = [pair for pair in pairs if pair.split == "train"]
    os.makedirs(args.output_dir, exist_ok=True)
    if args.smoke:
        train = train[:300]
        args.epochs, args.key_dim = 1, 8
        model = tiny_model(train)
        model_file = os.path.join(args.output_dir, "smoke_transformer.keras")
        replace_atomically(model.save, model_file, suffix=".keras")  # for bible_alignments.py
    else:
        model_file = model_path(args.model)
        model = keras.models.load_model(model_file)
    started = time.time()
    links = reference_alignments(
        [p.source for p in train], [p.target for p in train], model.source_tokenizer,
        model.target_tokenizer,
        cache_path=args.links_cache or os.path.join(args.output_dir, "reference_links.npz"))
    links_seconds = time.time() - started
    print(f"{len(train):,} training verses, {sum(len(row) for row in links):,} piece links "
          f"({links_seconds:.0f} s)", flush=True)
    started = time.time()
    head, losses = train_alignment_head(
        model, [p.source for p in train], [p.target for p in train], links, layer=args.layer,
        shift=args.shift, key_dim=args.key_dim, epochs=args.epochs, batch_size=args.batch_size,
        learning_rate=args.learning_rate, seed=args.seed)
    seconds = time.time() - started
    path = os.path.join(args.output_dir, "alignment_head.keras")
    replace_atomically(head.save, path, suffix=".keras")
    record = {"model": model_file, "head": path, "arguments": vars(args),
              "training_verses": len(train), "piece_links": sum(len(row) for row in links),
              "losses": losses, "train_seconds": round(seconds, 1),
              "links_seconds": round(links_seconds, 1)}

    def write(temporary):
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(record, handle, indent=2)

    replace_atomically(write, os.path.join(args.output_dir, "alignment_head.json"))
    print(f"alignment head: {path} ({seconds:.0f} s)", flush=True)
    return record


if __name__ == "__main__":
    main()
