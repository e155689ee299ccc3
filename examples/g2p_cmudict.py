"""Grapheme-to-phoneme (G2P) on the full CMUdict: train, decode, report WER / PER.

    # RNN (bidirectional LSTM encoder, GRU decoder, Bahdanau attention)
    .venv/bin/python examples/g2p_cmudict.py --output-dir runs/g2p_rnn
    # Transformer encoder–decoder
    .venv/bin/python examples/g2p_cmudict.py --model transformer --output-dir runs/g2p_transformer
    # keep the last 5 epoch checkpoints and decode with their average (issue 13)
    .venv/bin/python examples/g2p_cmudict.py --model transformer --average-last 5 ...
    # at the very end, once: also score the test split
    .venv/bin/python examples/g2p_cmudict.py ... --evaluate-test
    # a test of the script (tiny model, a few steps)
    .venv/bin/python examples/g2p_cmudict.py --smoke --output-dir /tmp/g2p

Data: CMUdict as packaged with kerasseq (`kerasseq.data.load_cmudict`), the
cmusphinx g2p-seq2seq split: 107,146 train / 6,302 dev / 12,604 test words,
stress removed, every pronunciation of a training word is a training pair.
Words are split into characters, pronunciations into phonemes.

Training: Adam with gradient clipping (RNN) or the warm-up / inverse square
root schedule of Vaswani et al. (Transformer), masked cross-entropy, length
bucketing, early stopping on the dev loss (best weights restored).

Evaluation: greedy and beam search on the dev words; WER = fraction of words
whose prediction is none of the reference pronunciations, PER = phoneme edit
distance to the closest reference / reference length
(`kerasseq.evaluation.g2p_error_rates`). `--evaluate-test` also scores the
test split — use it once, for the final model, not to pick settings.

Checkpoint averaging: `--keep-checkpoints N` saves the model of each of the
last N epochs in `--output-dir/checkpoints/epoch_XXX.keras`; `--average-last
N` also averages them (`kerasseq.training.average_checkpoints`) into
`averaged.keras` and decodes with that model from then on (its dev scores
in `dev`, those of the trained model in `dev_before_averaging`). To compare
beam widths, length penalties and ensembles of several runs on dev, see
`examples/g2p_search_table.py`.

Outputs in `--output-dir`: `model.keras`, `history.csv`, `results.json`
(and `checkpoints/`, `averaged.keras` with the options above).
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from kerasseq.data import (  # noqa: E402
    entries_to_pairs,
    load_cmudict,
    load_cmudict_tokenizers,
    make_dataset,
)
from kerasseq.evaluation import g2p_error_rates  # noqa: E402
from kerasseq.models import build_rnn_seq2seq  # noqa: E402
from kerasseq.training import (  # noqa: E402
    KeepLastCheckpoints,
    MaskedSparseCategoricalCrossentropy,
    MaskedTokenAccuracy,
    TimeLimit,
    average_checkpoints,
    epoch_checkpoints,
    transformer_optimizer,
)

try:  # written alongside the RNN; the example works without it
    from kerasseq.models import build_transformer_seq2seq
except ImportError:  # pragma: no cover
    build_transformer_seq2seq = None

MAX_LENGTH = 40  # longest CMUdict word: 34 characters; longest pronunciation: 32 phonemes


def build_model(args, source_tokenizer, target_tokenizer):
    """The model and its optimizer for `--model rnn|transformer`."""
    if args.model == "rnn":
        model = build_rnn_seq2seq(
            embedding_dim=args.embedding_dim, units=args.units,
            attention=None if args.attention == "none" else args.attention,
            dropout=args.dropout, max_target_length=MAX_LENGTH,
            source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer,
        )
        optimizer = keras.optimizers.Adam(args.learning_rate, clipnorm=1.0)
        return model, optimizer
    if build_transformer_seq2seq is None:
        raise SystemExit("--model transformer needs kerasseq.models.build_transformer_seq2seq")
    model = build_transformer_seq2seq(
        num_layers=args.num_layers, d_model=args.d_model, num_heads=args.num_heads,
        dff=args.dff, dropout=args.dropout, max_positions=MAX_LENGTH,
        source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer,
    )
    ema = {"use_ema": True, "ema_momentum": args.ema_momentum} if args.ema_momentum else {}
    optimizer = transformer_optimizer(args.d_model, warmup_steps=args.warmup_steps, **ema)
    return model, optimizer


def evaluate(model, entries, methods, num_beams, batch_size=256, length_penalty=0.0):
    """WER / PER and decoding time of each search method on `(word, prons)` entries."""
    words = [word for word, _ in entries]
    references = [prons for _, prons in entries]
    scores = {}
    for method in methods:
        search = ({"num_beams": num_beams, "length_penalty": length_penalty}
                  if method == "beam" else {})
        started = time.time()
        hypotheses = model.translate(words, method=method, batch_size=batch_size, **search)
        seconds = time.time() - started
        rates = g2p_error_rates(hypotheses, references)
        name = f"beam{num_beams}" if method == "beam" else method
        scores[name] = {**rates, "decode_seconds": round(seconds, 1)}
    return scores


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output-dir", default="runs/g2p_cmudict")
    parser.add_argument("--model", default="rnn", choices=["rnn", "transformer"])
    rnn = parser.add_argument_group("RNN")
    rnn.add_argument("--attention", default="bahdanau",
                     choices=["bahdanau", "luong", "luong_dot", "luong_concat", "none"])
    rnn.add_argument("--embedding-dim", type=int, default=64)
    rnn.add_argument("--units", type=int, default=256)
    rnn.add_argument("--learning-rate", type=float, default=2e-3)
    transformer = parser.add_argument_group("Transformer")
    transformer.add_argument("--num-layers", type=int, default=3)
    transformer.add_argument("--d-model", type=int, default=256)
    transformer.add_argument("--num-heads", type=int, default=4)
    transformer.add_argument("--dff", type=int, default=1024)
    transformer.add_argument("--warmup-steps", type=int, default=4000)
    transformer.add_argument("--ema-momentum", type=float, default=None,
                             help="keep an exponential moving average of the weights "
                                  "(e.g. 0.999) and use it for the final model; "
                                  "Keras swaps it in at the end of fit")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--patience", type=int, default=3,
                        help="early stopping: epochs without a better dev loss")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--label-smoothing", type=float, default=0.0)
    parser.add_argument("--time-limit-minutes", type=float, default=None,
                        help="stop training after this much wall-clock time")
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--dev-words", type=int, default=None,
                        help="dev words decoded for WER/PER (default: all 6,302)")
    parser.add_argument("--num-beams", type=int, default=5)
    parser.add_argument("--length-penalty", type=float, default=0.0,
                        help="beam search length penalty alpha (0: plain log-probability)")
    parser.add_argument("--tune-length-penalty", type=float, nargs="+", default=None,
                        metavar="ALPHA",
                        help="also decode dev with beam search at each of these alphas, "
                             "keep the best dev WER and use it for --evaluate-test")
    parser.add_argument("--keep-checkpoints", type=int, default=None, metavar="N",
                        help="save the model of every epoch in OUTPUT_DIR/checkpoints/ and keep "
                             "the last N (for kerasseq average)")
    parser.add_argument("--average-last", type=int, default=None, metavar="N",
                        help="after training, average the last N epoch checkpoints into "
                             "averaged.keras and decode with it (implies --keep-checkpoints N)")
    parser.add_argument("--evaluate-test", action="store_true",
                        help="also score the 12,604 test words (once, at the very end)")
    parser.add_argument("--initial-model", default=None,
                        help="continue training this saved model.keras (its optimizer "
                             "state and schedule included); model options are ignored")
    parser.add_argument("--evaluate-only", action="store_true",
                        help="with --initial-model: no training, only decode and score")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads TensorFlow may use (intra- and inter-op); "
                             "default: TensorFlow's choice (all cores)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", type=int, default=2, choices=[0, 1, 2])
    parser.add_argument("--smoke", action="store_true",
                        help="tiny model, 512 training pairs, a few steps (a test of the script)")
    return parser


def main(argv=None):
    args = make_parser().parse_args(argv)
    steps_per_epoch = None
    if args.smoke:
        args.max_train_examples, args.dev_words = 512, 32
        args.epochs = 2 if args.average_last else 1
        args.embedding_dim, args.units, args.num_beams = 16, 32, 2
        args.num_layers, args.d_model, args.num_heads, args.dff = 1, 32, 2, 64
        steps_per_epoch = 3
    if args.evaluate_only and not args.initial_model:
        make_parser().error("--evaluate-only needs --initial-model")
    for flag, value in (("--keep-checkpoints", args.keep_checkpoints),
                        ("--average-last", args.average_last)):
        if value is not None and value < 1:
            make_parser().error(f"{flag} must be >= 1, got {value}")
    stale = epoch_checkpoints(os.path.join(args.output_dir, "checkpoints"))
    if (args.keep_checkpoints or args.average_last) and not args.evaluate_only and stale:
        # Epoch numbers restart at 1 in every run: older, higher-numbered files
        # would count as the newest and end up in the average.
        make_parser().error(f"{os.path.dirname(stale[0])} already holds {len(stale)} epoch "
                            "checkpoint(s) of an earlier run; remove them or choose another "
                            "--output-dir")
    if args.threads:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    keras.utils.set_random_seed(args.seed)
    train_entries, dev_entries = load_cmudict("train"), load_cmudict("dev")
    train_pairs = entries_to_pairs(train_entries)[: args.max_train_examples]
    dev_pairs = entries_to_pairs(dev_entries)
    dev_entries = dev_entries[: args.dev_words]
    if args.smoke:
        dev_pairs = dev_pairs[:64]
    source_tokenizer, target_tokenizer = load_cmudict_tokenizers(train_entries)
    print(f"{len(train_pairs):,} training pairs, {len(dev_entries):,} dev words; "
          f"vocabularies: {source_tokenizer.vocabulary_size} characters, "
          f"{target_tokenizer.vocabulary_size} phonemes (with 4 reserved ids)")

    if args.initial_model:
        # Continue a run: weights, optimizer state (step count of the warm-up
        # schedule included), loss and tokenizers all come from the .keras file.
        model = keras.models.load_model(args.initial_model)
        source_tokenizer, target_tokenizer = model.source_tokenizer, model.target_tokenizer
        print(f"continuing {args.initial_model} from optimizer step "
              f"{int(model.optimizer.iterations.numpy()):,}")
    else:
        model, optimizer = build_model(args, source_tokenizer, target_tokenizer)
        model.compile(optimizer=optimizer,
                      loss=MaskedSparseCategoricalCrossentropy(label_smoothing=args.label_smoothing),
                      metrics=[MaskedTokenAccuracy()])
    train_data = make_dataset(train_pairs, source_tokenizer, target_tokenizer,
                              batch_size=args.batch_size, seed=args.seed,
                              bucket_boundaries="auto")
    dev_data = make_dataset(dev_pairs, source_tokenizer, target_tokenizer,
                            batch_size=args.batch_size, shuffle=False)
    os.makedirs(args.output_dir, exist_ok=True)
    callbacks = [
        keras.callbacks.EarlyStopping(monitor="val_loss", patience=args.patience,
                                      restore_best_weights=True),
        keras.callbacks.CSVLogger(os.path.join(args.output_dir, "history.csv")),
    ]
    if args.time_limit_minutes:
        callbacks.append(TimeLimit(args.time_limit_minutes * 60))
    checkpoint_dir = os.path.join(args.output_dir, "checkpoints")
    keep = max(args.keep_checkpoints or 0, args.average_last or 0)
    if keep:
        callbacks.append(KeepLastCheckpoints(checkpoint_dir, keep=keep))
    started = time.time()
    if args.evaluate_only:
        # Score a saved model (e.g. one whose run was cut short) without training.
        model_path, losses = args.initial_model, {"loss": [], "val_loss": [float("nan")]}
    else:
        losses = model.fit(train_data, validation_data=dev_data, epochs=args.epochs,
                           steps_per_epoch=steps_per_epoch, callbacks=callbacks,
                           verbose=args.verbose).history
        model_path = os.path.join(args.output_dir, "model.keras")
        model.save(model_path)
    train_seconds = time.time() - started
    final_dev_loss = None
    if args.ema_momentum and not args.evaluate_only:
        # fit() ended by swapping the moving average into the model; its dev loss
        # next to the last epoch's (live weights) shows what the average did.
        final_dev_loss = float(model.evaluate(dev_data, verbose=0, return_dict=True)["loss"])
        print(f"dev loss with the averaged weights: {final_dev_loss:.4f} "
              f"(live weights after the last epoch: {losses['val_loss'][-1]:.4f})")

    averaged_from = None
    if args.average_last and not args.evaluate_only:
        # One model whose weights are the mean of the last epochs' weights;
        # it replaces the trained model for every decoding below.
        averaged_from = epoch_checkpoints(checkpoint_dir, last=args.average_last)
        dev_before_averaging = evaluate(model, dev_entries, ["greedy", "beam"], args.num_beams,
                                        length_penalty=args.length_penalty)
        model = average_checkpoints(averaged_from)
        model_path = os.path.join(args.output_dir, "averaged.keras")
        model.save(model_path)
        print(f"averaged {len(averaged_from)} epoch checkpoints into {model_path}")

    results = {
        "model": args.model if args.model != "rnn" else f"rnn ({args.attention} attention)",
        "parameters": int(model.count_params()),
        "model_file_mb": round(os.path.getsize(model_path) / 2**20, 2),
        "train_pairs": len(train_pairs),
        "epochs_run": len(losses["loss"]),
        "train_seconds": round(train_seconds, 1),
        "threads": args.threads,
        "arguments": {k: v for k, v in vars(args).items() if k != "smoke"},
        "best_dev_loss": float(min(losses["val_loss"])),
        "final_dev_loss": final_dev_loss,
        "dev": evaluate(model, dev_entries, ["greedy", "beam"], args.num_beams,
                        length_penalty=args.length_penalty),
    }
    if averaged_from:
        results["averaged_checkpoints"] = [os.path.basename(path) for path in averaged_from]
        results["dev_before_averaging"] = dev_before_averaging
    length_penalty = args.length_penalty
    if args.tune_length_penalty:
        # Model selection on dev only: the test split never sees the other alphas.
        tuning = {args.length_penalty: results["dev"][f"beam{args.num_beams}"]}
        for alpha in args.tune_length_penalty:
            if alpha not in tuning:
                tuning[alpha] = evaluate(model, dev_entries, ["beam"], args.num_beams,
                                         length_penalty=alpha)[f"beam{args.num_beams}"]
            print(f"dev beam{args.num_beams} length_penalty={alpha}: "
                  f"WER {tuning[alpha]['wer']:.2%}  PER {tuning[alpha]['per']:.2%}")
        length_penalty = min(tuning, key=lambda alpha: (tuning[alpha]["wer"], tuning[alpha]["per"]))
        results["dev_length_penalty_tuning"] = {str(alpha): rates for alpha, rates in tuning.items()}
        results["dev"][f"beam{args.num_beams}"] = tuning[length_penalty]
        print(f"length_penalty chosen on dev: {length_penalty}")
    results["length_penalty"] = length_penalty
    if args.evaluate_test:
        test_entries = load_cmudict("test")[: 32 if args.smoke else None]
        results["test"] = evaluate(model, test_entries, ["greedy", "beam"], args.num_beams,
                                   length_penalty=length_penalty)
    with open(os.path.join(args.output_dir, "results.json"), "w") as handle:
        json.dump(results, handle, indent=2)

    print(f"{results['model']}: {results['parameters']:,} parameters "
          f"({results['model_file_mb']} MB .keras), {results['epochs_run']} epochs in "
          f"{train_seconds / 60:.1f} min")
    for split in ("dev", "test"):
        for method, scores in results.get(split, {}).items():
            print(f"{split} {method:>7} ({scores['words']:,} words): WER {scores['wer']:.2%}  "
                  f"PER {scores['per']:.2%}  ({scores['decode_seconds']:.0f} s)")
    words = [word for word, _ in dev_entries[:3]]
    for word, pronunciation in zip(words, model.translate(words), strict=True):
        print(f"  {word} → {pronunciation}")
    return results


if __name__ == "__main__":
    main()
