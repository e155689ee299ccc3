"""The `kerasseq` command line: train, translate, evaluate, demo.

    kerasseq train --dataset cmudict --model rnn --epochs 10 --output-dir runs/g2p
    kerasseq translate runs/g2p hello world --beam 4
    kerasseq evaluate runs/g2p --split dev
    kerasseq demo

Every command exits with 0 on success, 2 on bad arguments or unusable inputs
(a one-line message on stderr), 1 on other failures.
"""

import argparse
import json
import os
import sys
import time


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


# --------------------------------------------------------------------- data
def load_pairs(dataset, split, limit=None):
    """`(pairs, references)` for a dataset spec: "cmudict" or "tsv:PATH".

    `pairs` are (source, target) training pairs; `references` maps each
    distinct source to all its acceptable targets (for evaluation).
    """
    from kerasseq.data import entries_to_pairs, load_cmudict, load_tsv_pairs

    if dataset == "cmudict":
        entries = load_cmudict(split)
        if limit:
            entries = entries[:limit]
        return entries_to_pairs(entries), dict(entries)
    if dataset.startswith("tsv:"):
        path = dataset[4:]
        if not os.path.exists(path):
            raise CLIError(f"--dataset {dataset}: no such file: {path}")
        pairs = load_tsv_pairs(path)
        pairs = _split_tsv(pairs, split)
        if limit:
            pairs = pairs[:limit]
        references = {}
        for source, target in pairs:
            references.setdefault(source, []).append(target)
        return pairs, references
    raise CLIError(f"--dataset must be 'cmudict' or 'tsv:PATH'. Received: {dataset!r}")


def _split_tsv(pairs, split):
    """Deterministic 90/5/5 split of a TSV file by line index (train/dev/test)."""
    index_split = {"train": lambda i: i % 20 < 18, "dev": lambda i: i % 20 == 18,
                   "test": lambda i: i % 20 == 19, "all": lambda i: True}
    if split not in index_split:
        raise CLIError(f"--split must be train, dev, test or all. Received: {split!r}")
    return [pair for i, pair in enumerate(pairs) if index_split[split](i)]


def _tokenizers_for(dataset, pairs):
    from kerasseq.data import TextTokenizer

    if dataset == "cmudict":
        return (TextTokenizer.from_texts([s for s, _ in pairs], split="character", name="source_tokenizer"),
                TextTokenizer.from_texts([t for _, t in pairs], split="whitespace", name="target_tokenizer"))
    return (TextTokenizer.from_texts([s for s, _ in pairs], split="word", lowercase=True, name="source_tokenizer"),
            TextTokenizer.from_texts([t for _, t in pairs], split="word", lowercase=True, name="target_tokenizer"))


# -------------------------------------------------------------------- model
def build_model(args, source_tokenizer, target_tokenizer):
    from kerasseq.models import build_rnn_seq2seq

    if args.model != "rnn":
        raise CLIError(f"--model must be 'rnn'. Received: {args.model!r}")
    attention = None if args.attention == "none" else args.attention
    return build_rnn_seq2seq(
        embedding_dim=args.embedding_dim, units=args.units, attention=attention,
        dropout=args.dropout, num_encoder_layers=args.encoder_layers,
        max_target_length=args.max_target_length,
        source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer,
    )


def save_model_atomically(model, path):
    """Write `path` (a .keras file) via a temporary file and an atomic rename."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    temporary = os.path.join(directory, f".{os.path.basename(path)}.tmp-{os.getpid()}.keras")
    try:
        model.save(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def load_model(path):
    import keras

    import kerasseq.models  # noqa: F401  (registers the classes)

    model_file = os.path.join(path, "model.keras") if os.path.isdir(path) else path
    if not os.path.exists(model_file):
        raise CLIError(f"no kerasseq model at {path!r} (expected a .keras file or a directory "
                       "with model.keras)")
    try:
        model = keras.models.load_model(model_file)
    except Exception as error:  # noqa: BLE001  (reported as one line)
        raise CLIError(f"{model_file!r} is not a loadable kerasseq model: {error}") from None
    if not hasattr(model, "decode_step"):
        raise CLIError(f"{model_file!r} is a Keras model but not a kerasseq seq2seq model")
    return model


def train(args):
    import keras

    from kerasseq.data import make_dataset
    from kerasseq.training import MaskedSparseCategoricalCrossentropy, MaskedTokenAccuracy

    keras.utils.set_random_seed(args.seed)
    train_pairs, _ = load_pairs(args.dataset, "train", args.max_train_examples)
    dev_pairs, dev_references = load_pairs(args.dataset, "dev", args.max_dev_examples)
    source_tokenizer, target_tokenizer = _tokenizers_for(args.dataset, train_pairs)
    model = build_model(args, source_tokenizer, target_tokenizer)
    model.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=args.clipnorm),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=args.label_smoothing),
        metrics=[MaskedTokenAccuracy()],
    )
    train_data = make_dataset(train_pairs, source_tokenizer, target_tokenizer,
                              batch_size=args.batch_size, seed=args.seed, bucket_boundaries="auto")
    dev_data = make_dataset(dev_pairs, source_tokenizer, target_tokenizer,
                            batch_size=args.batch_size, shuffle=False)
    os.makedirs(args.output_dir, exist_ok=True)
    callbacks = [
        keras.callbacks.BackupAndRestore(os.path.join(args.output_dir, "backup")),
        keras.callbacks.CSVLogger(os.path.join(args.output_dir, "history.csv"), append=True),
    ]
    started = time.time()
    history = model.fit(train_data, validation_data=dev_data, epochs=args.epochs,
                        callbacks=callbacks, verbose=args.verbose)
    seconds = time.time() - started
    save_model_atomically(model, os.path.join(args.output_dir, "model.keras"))
    summary = {"train_seconds": round(seconds, 1), "epochs": args.epochs,
               "parameters": int(model.count_params()),
               "train_pairs": len(train_pairs), "history": history.history}
    if args.dataset == "cmudict" and args.evaluate_words:
        words = list(dev_references)[: args.evaluate_words]
        summary["dev"] = evaluate_g2p(model, words, [dev_references[w] for w in words])
        print(f"dev ({len(words)} words, greedy): WER {summary['dev']['wer']:.2%}  "
              f"PER {summary['dev']['per']:.2%}")
    with open(os.path.join(args.output_dir, "summary.json"), "w") as handle:
        json.dump(summary, handle, indent=2, default=float)
    return model


def evaluate_g2p(model, words, references, method="greedy", batch_size=256, verbose=0, **search):
    from kerasseq.evaluation import g2p_error_rates

    hypotheses = model.translate(words, method=method, batch_size=batch_size, verbose=verbose, **search)
    return g2p_error_rates(hypotheses, references)


# ----------------------------------------------------------------- commands
def command_train(args):
    train(args)
    print(f"saved {os.path.join(args.output_dir, 'model.keras')}")


def _search_kwargs(args):
    if args.beam and args.beam > 1:
        return {"method": "beam", "num_beams": args.beam, "num_return": args.nbest or 1,
                "length_penalty": args.length_penalty}
    if args.nbest and args.nbest > 1:
        raise CLIError("--nbest needs --beam N with N >= --nbest")
    return {"method": "greedy"}


def command_translate(args):
    model = load_model(args.model_dir)
    texts = args.texts or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not texts:
        raise CLIError("no text to translate: pass texts as arguments or on standard input")
    for text in texts:
        if not text.strip():
            raise CLIError(f"cannot translate an empty text: {text!r}")
    search = _search_kwargs(args)
    translations = model.translate(texts, **search)
    for text, translation in zip(texts, translations):
        if isinstance(translation, list):
            print(text + "\t" + " | ".join(translation))
        else:
            print(f"{text}\t{translation}")


def command_evaluate(args):
    model = load_model(args.model_dir)
    _, references = load_pairs(args.dataset, args.split, args.limit)
    words = list(references)
    search = _search_kwargs(args)
    search.pop("num_return", None)
    rates = evaluate_g2p(model, words, [references[w] for w in words], verbose=1, **search)
    print(json.dumps({"split": args.split, **rates}))


def command_demo(args):
    import keras

    args.dataset, args.model, args.attention = "cmudict", "rnn", "bahdanau"
    print(f"kerasseq demo: training a G2P model (LSTM encoder + Bahdanau attention + GRU "
          f"decoder) on {args.max_train_examples} CMUdict words for {args.epochs} epochs")
    model = train(args)
    print(f"parameters: {model.count_params():,}")
    words = ["hello", "world", "keras", "sequence", "attention", "translation", "kerasseq"]
    for word, phonemes in zip(words, model.translate(words)):
        print(f"  {word:12s} -> {phonemes}")
    print(f"model saved to {os.path.join(args.output_dir, 'model.keras')}; try:\n"
          f"  .venv/bin/kerasseq translate {args.output_dir} tensorflow --beam 4")
    keras.backend.clear_session()


# ------------------------------------------------------------------- parser
def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _add_model_arguments(parser, epochs, max_train, evaluate_words):
    parser.add_argument("--dataset", default="cmudict", help="cmudict (default) or tsv:PATH")
    parser.add_argument("--model", default="rnn", choices=["rnn"])
    parser.add_argument("--attention", default="bahdanau",
                        choices=["bahdanau", "luong", "luong_dot", "luong_concat", "none"])
    parser.add_argument("--embedding-dim", type=_positive_int, default=64)
    parser.add_argument("--units", type=_positive_int, default=128)
    parser.add_argument("--encoder-layers", type=_positive_int, default=1)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--max-target-length", type=_positive_int, default=32)
    parser.add_argument("--epochs", type=_positive_int, default=epochs)
    parser.add_argument("--batch-size", type=_positive_int, default=64)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--clipnorm", type=float, default=1.0)
    parser.add_argument("--label-smoothing", type=float, default=0.0)
    parser.add_argument("--max-train-examples", type=_positive_int, default=max_train)
    parser.add_argument("--max-dev-examples", type=_positive_int, default=None)
    parser.add_argument("--evaluate-words", type=int, default=evaluate_words,
                        help="dev words decoded for WER/PER after training (0 = none)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", type=int, default=2, choices=[0, 1, 2])


def _add_search_arguments(parser):
    parser.add_argument("--beam", type=_positive_int, default=None, help="beam size (default greedy)")
    parser.add_argument("--nbest", type=_positive_int, default=None)
    parser.add_argument("--length-penalty", type=float, default=0.0)


def make_parser():
    parser = argparse.ArgumentParser(prog="kerasseq", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    train_parser = commands.add_parser("train", help="train a model")
    _add_model_arguments(train_parser, epochs=10, max_train=None, evaluate_words=2000)
    train_parser.add_argument("--output-dir", required=True)
    train_parser.set_defaults(handler=command_train)

    translate_parser = commands.add_parser("translate", help="translate texts")
    translate_parser.add_argument("model_dir")
    translate_parser.add_argument("texts", nargs="*")
    _add_search_arguments(translate_parser)
    translate_parser.set_defaults(handler=command_translate)

    evaluate_parser = commands.add_parser("evaluate", help="WER/PER on a split")
    evaluate_parser.add_argument("model_dir")
    evaluate_parser.add_argument("--dataset", default="cmudict")
    evaluate_parser.add_argument("--split", default="dev", choices=["train", "dev", "test"])
    evaluate_parser.add_argument("--limit", type=_positive_int, default=None)
    _add_search_arguments(evaluate_parser)
    evaluate_parser.set_defaults(handler=command_evaluate)

    demo_parser = commands.add_parser("demo", help="train a small G2P model and translate")
    _add_model_arguments(demo_parser, epochs=4, max_train=8000, evaluate_words=500)
    demo_parser.add_argument("--output-dir", default="runs/demo")
    demo_parser.set_defaults(handler=command_demo)
    return parser


def main(argv=None):
    args = make_parser().parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import kerasseq  # noqa: F401  (backend check)

        args.handler(args)
    except CLIError as error:
        print(f"kerasseq {args.command}: error: {error}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as error:
        print(f"kerasseq {args.command}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
