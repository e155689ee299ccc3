"""What the sentence-translation examples share (German → English on the
FreeDict Ding pairs, Spanish → English on the SWORD Bibles): their models,
optimizers, the handling of `--threads` and `--models`, and the test report.

Not part of kerasseq: a helper module of `examples/` (each example imports it
from the folder it runs in).
"""

import os

import keras
import tensorflow as tf

from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq
from kerasseq.plotting import plot_learning_curves
from kerasseq.training import (
    MaskedSparseCategoricalCrossentropy,
    MaskedTokenAccuracy,
    transformer_optimizer,
)

MODELS = ("transformer", "rnn_attention", "rnn_none")


def set_threads(threads):
    """`--threads N`: TensorFlow's intra- and inter-op threads (0: TensorFlow's choice)."""
    if not threads:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError as error:  # TensorFlow already running (e.g. inside the tests)
        print(f"--threads ignored: {error}")


def model_names(text, models=MODELS):
    """`--models a,b`: the names in order; an unknown one ends the run with a message."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(names) - set(models))
    if unknown:
        raise SystemExit(f"unknown --models {unknown}; choose from {list(models)}")
    return names


def build_model(name, args, tokenizers, positions, max_target_length, norm_first):
    """The model `name` (one of MODELS), compiled.

    The Transformer (`--layers`, `--d-model`, `--heads`, `--dff`,
    `--transformer-dropout`) has a position table of `positions` and trains
    with the warm-up schedule (`--warmup-steps`, `--lr-scale`); the RNNs
    (`--embedding-dim`, `--units`, `--dropout`, Bahdanau attention unless
    `name` is "rnn_none") with Adam at `--learning-rate`. "transformer_guided"
    is the Transformer with guided alignment (`--guided-alignment-weight`,
    `--guided-alignment-layer`, `--guided-alignment-head`). Gradients are
    clipped to norm 1; the loss is label-smoothed by `--label-smoothing`.
    """
    source_tokenizer, target_tokenizer = tokenizers
    if name.startswith("transformer"):
        # one vocabulary for both languages (`--shared-vocabulary-size`): one
        # embedding matrix, also the output projection (three-way tying)
        shared = ({"share_embeddings": True, "tie_output": True}
                  if getattr(args, "shared_vocabulary_size", 0) else {})
        guided = {}
        if name == "transformer_guided":  # one cross-attention head trained to align
            guided = dict(guided_alignment_weight=args.guided_alignment_weight,
                          guided_alignment_layer=args.guided_alignment_layer,
                          guided_alignment_head=args.guided_alignment_head)
        model = build_transformer_seq2seq(
            num_layers=args.layers, d_model=args.d_model, num_heads=args.heads, dff=args.dff,
            dropout=args.transformer_dropout, max_positions=positions, norm_first=norm_first,
            source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer, name=name,
            **guided, **shared)
        optimizer = transformer_optimizer(args.d_model, warmup_steps=args.warmup_steps,
                                          scale=args.lr_scale, clipnorm=1.0)
    else:
        model = build_rnn_seq2seq(
            embedding_dim=args.embedding_dim, units=args.units,
            attention=None if name == "rnn_none" else "bahdanau",
            dropout=args.dropout, max_target_length=max_target_length,
            source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer, name=name)
        optimizer = keras.optimizers.Adam(args.learning_rate, clipnorm=1.0)
    model.compile(optimizer=optimizer,
                  loss=MaskedSparseCategoricalCrossentropy(label_smoothing=args.label_smoothing),
                  metrics=[MaskedTokenAccuracy()])
    return model


def print_report(results, output_dir, heading, num_beams, digits, score_title="dev BLEU (greedy)",
                 x=None, x_label=None):
    """Plot the learning curves of `results["models"]` (learning_curves.png in
    `output_dir`; against the history key `x` instead of epochs when given)
    and print one test line per model under `heading`."""
    models = results["models"]
    plot_learning_curves({name: scores["history"] for name, scores in models.items()},
                         score_title=score_title, loss_ylabel="loss (label-smoothed)",
                         path=os.path.join(output_dir, "learning_curves.png"), x=x,
                         x_label=x_label)
    print(heading)
    for name, scores in models.items():
        averaged = f", averaged: {scores['averaged']}" if "averaged" in scores else ""
        print(f"  {name:>13}: BLEU greedy {scores['test_bleu_greedy']:.{digits}f}  "
              f"beam({num_beams}, lp {scores['length_penalty']}) "
              f"{scores['test_bleu_beam']:.{digits}f}  chrF {scores['test_chrf_beam']:.1f}  "
              f"({scores['parameters']:,} parameters, best epoch {scores['best_epoch']} of "
              f"{len(scores['history']['loss'])}, {scores['train_seconds'] / 60:.1f} min"
              f"{averaged})")
