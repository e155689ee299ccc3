"""Multi-worker training throughput: one worker vs two local workers (CPU), and the all-reduce's share.

    .venv/bin/python benchmarks/multi_worker.py                   # full: ~5 min on 2 cores
    .venv/bin/python benchmarks/multi_worker.py --quick           # ~2 min

Every setting trains the same G2P RNN (LSTM encoder + Bahdanau attention +
GRU decoder) on the same CMUdict pairs with the same *global* batch, through
`kerasseq.training.DistributedTrainer` under `MultiWorkerMirroredStrategy`
(worker processes on localhost, `TF_CONFIG` from `local_tf_configs`):

* `1 worker x 1 thread`  - the baseline;
* `1 worker x 2 threads` - the same machine used by one process;
* `2 workers x 1 thread` - each worker computes half of every global batch,
  then the gradients are all-reduced over gRPC.

Tokens/s counts real target tokens of the timed epochs (the first epoch,
which traces the step, is not timed). In the 2-worker setting each worker
also times a `tf.function` that all-reduces a list of tensors shaped like the
model's trainable weights (what one step sends), so the share of a step spent
in the all-reduce is measured, not estimated; the exact step of
`kerasseq.training.distribute` does it twice when gradients are clipped
(`--clipnorm`, the CLI default 1.0) and once otherwise.

What it predicts for real hosts: the step's compute halves with two workers
(each has half the batch) while the all-reduce costs `2 (n-1)/n x bytes`
per worker per step over the network (ring all-reduce); on a 2-core machine
the two workers also share the cores and memory bandwidth, so the measured
ratio is a floor for what two real hosts give, and the all-reduce share is
that of loopback gRPC, not of a datacenter network.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(args):
    """One worker process: train, time, print one JSON line."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    import keras
    import numpy as np

    from kerasseq.data import TextTokenizer, entries_to_pairs, load_cmudict
    from kerasseq.models import build_rnn_seq2seq
    from kerasseq.training import (
        MaskedSparseCategoricalCrossentropy,
        MaskedTokenAccuracy,
    )
    from kerasseq.training.distribute import get_strategy
    from kerasseq.training.trainer import DistributedTrainer, sharded_dataset_fn

    strategy = get_strategy("multi_worker")
    entries = load_cmudict("train")
    pairs = entries_to_pairs(entries[:: max(1, len(entries) // args.pairs)][: args.pairs])
    source = TextTokenizer.from_texts([s for s, _ in pairs], split="character", lowercase=True)
    target = TextTokenizer.from_texts([t for _, t in pairs], split="whitespace")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = build_rnn_seq2seq(embedding_dim=64, units=args.units, attention="bahdanau",
                                  source_tokenizer=source, target_tokenizer=target)
        model.compile(optimizer=keras.optimizers.Adam(1e-3, clipnorm=args.clipnorm or None),
                      loss=MaskedSparseCategoricalCrossentropy(), metrics=[MaskedTokenAccuracy()])
    data = sharded_dataset_fn(pairs, source, target, args.batch_size, seed=0,
                              bucket_boundaries="auto")
    tokens = sum(len(t.split()) + 1 for _, t in pairs)  # target tokens + [END]
    trainer = DistributedTrainer(model, strategy)

    class EpochTimes(keras.callbacks.Callback):
        times = []

        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()
            self.steps = 0

        def on_train_batch_end(self, batch, logs=None):
            self.steps += 1

        def on_epoch_end(self, epoch, logs=None):
            self.times.append(time.perf_counter() - self.started)

    timer = EpochTimes()
    history = trainer.fit(data, epochs=args.epochs, verbose=0, callbacks=[timer])
    timed = timer.times[1:]
    steps = timer.steps
    report = {"epoch_seconds": timed, "tokens_per_second": tokens * len(timed) / sum(timed),
              "loss": history.history["loss"][-1], "steps_per_epoch": steps,
              "parameters": int(model.count_params()),
              "gradient_bytes": int(sum(np.prod(w.shape) * 4 for w in model.trainable_weights))}
    if strategy.num_replicas_in_sync > 1:
        report["all_reduce_seconds"] = time_all_reduce(strategy, model, repeats=20)
        report["scalar_all_reduce_seconds"] = time_all_reduce(strategy, model, repeats=20,
                                                              scalar=True)
    print("REPORT " + json.dumps(report), flush=True)


def time_all_reduce(strategy, model, repeats, scalar=False):
    """Seconds per all-reduce (SUM) of tensors shaped like the trainable weights (or of
    one scalar: the latency of a collective)."""
    import tensorflow as tf

    shapes = [()] if scalar else [tuple(w.shape) for w in model.trainable_weights]

    @tf.function
    def all_reduce():
        def replica_fn():
            context = tf.distribute.get_replica_context()
            return context.all_reduce(tf.distribute.ReduceOp.SUM,
                                      [tf.ones(shape) for shape in shapes])

        return strategy.run(replica_fn)

    all_reduce()  # trace + warm up
    started = time.perf_counter()
    for _ in range(repeats):
        result = all_reduce()
    tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t,
                          strategy.experimental_local_results(result))
    return (time.perf_counter() - started) / repeats


def launch(args, workers, threads):
    from kerasseq.training.distribute import local_tf_configs

    command = [sys.executable, os.path.abspath(__file__), "--role", "worker", "--threads",
               str(threads), "--pairs", str(args.pairs), "--epochs", str(args.epochs),
               "--batch-size", str(args.batch_size), "--units", str(args.units),
               "--clipnorm", str(args.clipnorm)]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    processes = [subprocess.Popen(command, env={**env, "TF_CONFIG": config},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for config in local_tf_configs(workers)]
    reports = []
    for process in processes:
        out, err = process.communicate(timeout=1800)
        if process.returncode:
            raise RuntimeError(err[-3000:])
        line = next(line for line in out.splitlines() if line.startswith("REPORT "))
        reports.append(json.loads(line[len("REPORT "):]))
    return reports[0]  # the chief's (every worker reports the same global tokens)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--role", default="driver", choices=["driver", "worker"])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=3, help="the first one is not timed")
    parser.add_argument("--batch-size", type=int, default=64, help="the global batch")
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--clipnorm", type=float, default=1.0, help="0: no clipping")
    args = parser.parse_args()
    if args.role == "worker":
        return worker(args)
    if args.quick:
        args.pairs, args.epochs = 1500, 2
    settings = [("1 worker x 1 thread", 1, 1), ("1 worker x 2 threads", 1, 2),
                ("2 workers x 1 thread", 2, 1)]
    results = {}
    for name, workers, threads in settings:
        results[name] = launch(args, workers, threads)
        print(f"{name:22s} {results[name]['tokens_per_second']:8.0f} tokens/s "
              f"(epochs {', '.join(f'{s:.1f}' for s in results[name]['epoch_seconds'])} s, "
              f"final loss {results[name]['loss']:.4f})", flush=True)
    base = results["1 worker x 1 thread"]["tokens_per_second"]
    print()
    for name in results:
        print(f"{name:22s} {results[name]['tokens_per_second'] / base:5.2f}x the 1-worker rate")
    two = results["2 workers x 1 thread"]
    step = sum(two["epoch_seconds"]) / len(two["epoch_seconds"]) / two["steps_per_epoch"]
    reduces = 2 if args.clipnorm else 1
    share = reduces * two["all_reduce_seconds"] / step
    # Small collectives per step: the loss's global token count, the metric states
    # (one vector), and without clipping the global loss.
    small = 2 if args.clipnorm else 3
    small_share = small * two["scalar_all_reduce_seconds"] / step
    one_step = sum(results["1 worker x 1 thread"]["epoch_seconds"]) / len(
        results["1 worker x 1 thread"]["epoch_seconds"]) / results["1 worker x 1 thread"][
        "steps_per_epoch"]
    print(f"\nparameters {two['parameters']:,}; gradient {two['gradient_bytes'] / 1e6:.2f} MB "
          f"per all-reduce; {two['steps_per_epoch']} steps per epoch")
    print(f"1 worker: step {one_step * 1000:.1f} ms (the whole global batch, no collective)")
    print(f"2 workers: step {step * 1000:.1f} ms; gradient all-reduce "
          f"{two['all_reduce_seconds'] * 1000:.1f} ms x {reduces} "
          f"({'clipping' if args.clipnorm else 'no clipping'}) = {share:.0%} of the step; "
          f"scalar all-reduce (latency) {two['scalar_all_reduce_seconds'] * 1000:.1f} ms x {small} "
          f"= {small_share:.0%}")


if __name__ == "__main__":
    main()
