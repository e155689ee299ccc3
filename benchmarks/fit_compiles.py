"""Training speed a GPU user can read: compiles, compile seconds, epoch seconds.

Keras' default `compile(jit_compile="auto")` trains with XLA on a GPU, and XLA
compiles one program per batch shape. This benchmark trains the README's
models on the README's data with Keras' `fit` and prints, side by side in one
run, for each model, pipeline and `jit_compile`:

- `shapes`: distinct batch shapes of epoch 1 (what the train function sees;
  with `jit_compile=True` XLA compiles one program for each);
- `all`: distinct batch shapes over all the epochs run;
- `positions`: source positions of epoch 1, padding included (rows x
  columns of every batch: the work the padding adds);
- `compile s`: seconds the first batch of each new shape took beyond a
  steady step (tracing + compiling), summed over epoch 1;
- `epoch 1 s`, `epoch 2 s`: wall seconds to the end of each epoch;
- `step s`: the median step of epoch 2.

Models: the README's RNN (`build_rnn_seq2seq(attention="bahdanau")`,
`Adam(2e-3, clipnorm=1.0)`) and the demo Transformer (`kerasseq train
--model transformer`'s defaults: 2 layers, d_model 128, 4 heads, dff 512).
Pipelines: `fixed` is `make_dataset(..., bucket_boundaries="auto")` as it is
now (`fixed_shapes=True`: `batch_size` rows, lengths 8, 12, 16, ...);
`tight` is `fixed_shapes=False` (what `"auto"` was before: percentile buckets,
each batch padded to its own longest sequence, short last batches). On a GPU
the RNN also runs with cuDNN (`use_cudnn=True`, no XLA: Keras cannot compile
cuDNN's kernel).

Data: the first `--words` CMUdict training words (10,000: the README's data,
`make demo`'s), batch 64, seed 0. Every configuration runs in a fresh
process (no compile cache shared), one after the other.

    .venv/bin/python benchmarks/fit_compiles.py            # full: ~25 min on 2 CPU cores
    .venv/bin/python benchmarks/fit_compiles.py --quick    # 2,000 words, RNN only
    python benchmarks/fit_compiles.py --pipelines fixed    # a GPU (benchmarks/gpu_checks.sh)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _configurations(models, pipelines, jits, gpu):
    for model in models:
        for pipeline in pipelines:
            for jit in jits:
                yield {"model": model, "pipeline": pipeline, "jit": jit, "cudnn": False}
        if model == "rnn" and gpu and "fixed" in pipelines:
            yield {"model": model, "pipeline": "fixed", "jit": False, "cudnn": True}


def _build(config, words, phonemes):
    import keras

    from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq
    from kerasseq.training import (
        MaskedSparseCategoricalCrossentropy,
        MaskedTokenAccuracy,
    )

    if config["model"] == "rnn":
        model = build_rnn_seq2seq(attention="bahdanau", source_tokenizer=words,
                                  target_tokenizer=phonemes, use_cudnn=config["cudnn"])
        optimizer = keras.optimizers.Adam(2e-3, clipnorm=1.0)
    else:
        model = build_transformer_seq2seq(source_tokenizer=words, target_tokenizer=phonemes)
        optimizer = keras.optimizers.Adam(1e-3)
    model.compile(optimizer=optimizer, loss=MaskedSparseCategoricalCrossentropy(),
                  metrics=[MaskedTokenAccuracy()], jit_compile=config["jit"])
    return model


def run_one(config, words_count, epochs, batch_size):
    """Train one configuration in this process; returns its figures."""
    import keras

    from kerasseq.data import (
        entries_to_pairs,
        load_cmudict,
        load_cmudict_tokenizers,
        make_dataset,
    )

    keras.utils.set_random_seed(0)
    train = load_cmudict("train")[:words_count]
    words, phonemes = load_cmudict_tokenizers(train)
    pairs = entries_to_pairs(train)

    def dataset():
        return make_dataset(pairs, words, phonemes, batch_size=batch_size, seed=0,
                            bucket_boundaries="auto",
                            fixed_shapes=config["pipeline"] == "fixed")

    # A twin with the same arguments gives the same batches, epoch after epoch, as fit's.
    twin = dataset()
    epochs_shapes = [[tuple(tuple(t.shape) for t in keras.tree.flatten(batch)) for batch in twin]
                     for _ in range(epochs)]
    shapes = epochs_shapes[0]
    model = _build(config, words, phonemes)

    class Times(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.batches, self.epochs = [], []

        def on_train_batch_begin(self, batch, logs=None):
            self._start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.batches.append(time.perf_counter() - self._start)

        def on_epoch_end(self, epoch, logs=None):
            self.epochs.append((time.perf_counter() - started, len(self.batches),
                                float(logs["loss"])))

    times = Times()
    started = time.perf_counter()
    model.fit(dataset(), epochs=epochs, verbose=0, callbacks=[times])
    first_epoch = times.batches[:times.epochs[0][1]]
    later = times.batches[times.epochs[0][1]:] or first_epoch
    steady = statistics.median(later)
    seen, compile_seconds = set(), 0.0
    for shape, seconds in zip(shapes, first_epoch, strict=True):
        if shape not in seen:
            seen.add(shape)
            compile_seconds += max(0.0, seconds - steady)
    ends = [end for end, _, _ in times.epochs]
    every = {shape for epoch_shapes in epochs_shapes for shape in epoch_shapes}
    positions = sum(rows * columns for ((rows, columns), *_) in shapes)  # (source_ids first)
    return {**config, "shapes": len(seen), "all_shapes": len(every), "positions": positions,
            "batches": len(first_epoch),
            "compile_s": compile_seconds, "epoch_s": [ends[0]] + [
                b - a for a, b in zip(ends, ends[1:], strict=False)],
            "end_s": ends, "step_s": steady, "loss": [loss for _, _, loss in times.epochs]}


def _run_child(config, args):
    command = [sys.executable, os.path.abspath(__file__), "--one", json.dumps(config),
               "--words", str(args.words), "--epochs", str(args.epochs),
               "--batch-size", str(args.batch_size)]
    completed = subprocess.run(command, capture_output=True, text=True)
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    if completed.returncode or not lines:
        sys.stderr.write(completed.stderr[-3000:])
        raise SystemExit(f"configuration {config} failed (rc {completed.returncode})")
    return json.loads(lines[-1])


def _name(result):
    jit = "XLA" if result["jit"] else ("cuDNN" if result["cudnn"] else "no XLA")
    return f"{result['model']:<11} {result['pipeline']:<6} {jit:<6}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 words, the RNN only")
    parser.add_argument("--models", default=None, help="rnn,transformer (default both)")
    parser.add_argument("--words", type=int, default=None)
    parser.add_argument("--pipelines", default="tight,fixed",
                        help="tight,fixed (default both; on a GPU tight with XLA compiles a "
                             "program almost every batch)")
    parser.add_argument("--jit", choices=["both", "on", "off"], default="both",
                        help="jit_compile=True and False (both), or one of them")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.words is None:
        args.words = 2000 if args.quick else 10_000
    if args.one:
        print(json.dumps(run_one(json.loads(args.one), args.words, args.epochs,
                                 args.batch_size)), flush=True)
        return None
    import tensorflow as tf

    gpu = bool(tf.config.list_physical_devices("GPU"))
    models = (args.models or ("rnn" if args.quick else "rnn,transformer")).split(",")
    device = "GPU " + tf.config.experimental.get_device_details(
        tf.config.list_physical_devices("GPU")[0]).get("device_name", "") if gpu else "CPU"
    print(f"fit_compiles: {args.words:,} CMUdict words, batch {args.batch_size}, "
          f"{args.epochs} epochs, {device}, TensorFlow {tf.__version__}", flush=True)
    header = (f"{'model':<11} {'pipe':<6} {'jit':<6} {'shapes':>6} {'all':>4} {'positions':>9} "
              f"{'compile s':>9} {'epoch 1 s':>9} {'epoch 2 s':>9} {'end 2 s':>8} {'step s':>7}")
    print(header, flush=True)
    results = []
    jits = {"both": (True, False), "on": (True,), "off": (False,)}[args.jit]
    for config in _configurations(models, args.pipelines.split(","), jits, gpu):
        result = _run_child(config, args)
        results.append(result)
        epoch_2 = f"{result['epoch_s'][1]:9.1f}" if len(result["epoch_s"]) > 1 else f"{'-':>9}"
        print(f"{_name(result)} {result['shapes']:>6} {result['all_shapes']:>4} "
              f"{result['positions']:>9,} {result['compile_s']:>9.1f} "
              f"{result['epoch_s'][0]:>9.1f} {epoch_2} {result['end_s'][-1]:>8.1f} "
              f"{result['step_s']:>7.3f}", flush=True)
    print("\nfixed against tight (same model and jit):")
    for fixed in results:
        if fixed["pipeline"] != "fixed" or fixed["cudnn"]:
            continue
        tight = next((r for r in results if r["pipeline"] == "tight" and not r["cudnn"]
                      and (r["model"], r["jit"]) == (fixed["model"], fixed["jit"])), None)
        if tight is None:
            continue
        jit = "XLA" if fixed["jit"] else "no XLA"
        print(f"  {fixed['model']:<11} {jit:<6} shapes {tight['shapes']} -> {fixed['shapes']} "
              f"({fixed['shapes'] / tight['shapes']:.2f}x), compile s {tight['compile_s']:.1f} -> "
              f"{fixed['compile_s']:.1f} ({fixed['compile_s'] / max(tight['compile_s'], 1e-9):.2f}x), "
              f"epoch 1 {fixed['epoch_s'][0] / tight['epoch_s'][0]:.2f}x, "
              f"steady epoch {fixed['epoch_s'][-1] / tight['epoch_s'][-1]:.2f}x")
    return results


if __name__ == "__main__":
    main()
