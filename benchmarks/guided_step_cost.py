"""What guided alignment costs per training step, and how fast the machine is today.

The Bible Transformer of `examples/spanish_to_english_bible.py` (its
`build_model`, its defaults, one shared vocabulary of `--vocabulary` ids with
tied embeddings, as `--shared-vocabulary-size` builds it) is built twice,
without and with guided alignment (`transformer` and `transformer_guided`),
and both train with `model.fit` on one synthetic batch of `--batch` rows,
`--length` source and target pieces, every piece real, with one link per
target piece for the guided one. The two models alternate for `--rounds`
rounds of `--steps` steps in one process, after an untimed warm-up `fit`
each (tracing); the script prints the median seconds per step of each
model, the ratio guided / unguided, and the machine's float32 matmul rate
(`matmul_gflops`, the figure each Bible run now records before and after its
`fit`), measured before and after.

A budget in minutes buys `minutes × 60 / seconds-per-step` steps: the ratio
says how many fewer steps the guided model gets in the same minutes, and
the matmul rate whether two runs' minutes are comparable at all.

    .venv/bin/python benchmarks/guided_step_cost.py                 # ~3 minutes on 2 cores
    .venv/bin/python benchmarks/guided_step_cost.py --smoke         # a tiny model, seconds
"""

import argparse
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import spanish_to_english_bible as bible  # noqa: E402
import tensorflow as tf  # noqa: E402
from _translation_common import build_model  # noqa: E402

from kerasseq.data import TextTokenizer  # noqa: E402

NAMES = ("transformer", "transformer_guided")


def synthetic_batch(vocabulary_size, batch, length, guided, seed=0):
    """One `(inputs, target_out)` batch of real pieces (ids >= 4, no padding);
    with `guided`, the inputs are the guided dict with one link per target piece."""
    rng = np.random.default_rng(seed)
    source, target_in, target_out = (rng.integers(4, vocabulary_size, (batch, length)).astype("int32")
                                     for _ in range(3))
    if not guided:
        return (source, target_in), target_out
    links = np.zeros((batch, length, length), "float32")
    links[np.arange(batch)[:, None], np.arange(length)[None, :],
          rng.integers(0, length, (batch, length))] = 1.0
    return {"source_ids": source, "target_in_ids": target_in, "alignment_links": links}, target_out


class StepClock(keras.callbacks.Callback):
    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds

    def on_train_batch_begin(self, batch, logs=None):
        self._started = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.seconds.append(time.perf_counter() - self._started)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocabulary", type=int, default=7756,
                        help="ids of the shared vocabulary (7,756: the 8,000-piece run's)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="a tiny model and batch")
    args = parser.parse_args(argv)
    example_flags = ["--shared-vocabulary-size", "8000"]
    if args.smoke:
        args.vocabulary, args.batch, args.length, args.rounds, args.steps = 60, 4, 6, 2, 2
        example_flags += ["--layers", "2", "--d-model", "16", "--heads", "2", "--dff", "32"]
    recipe = bible.make_parser().parse_args(example_flags)
    words = [f"w{index}" for index in range(args.vocabulary - 4)]  # + 4 special ids
    tokenizer = TextTokenizer.from_texts([" ".join(words)], split="whitespace")
    if tokenizer.vocabulary_size != args.vocabulary:
        raise SystemExit(f"the synthetic vocabulary has {tokenizer.vocabulary_size} ids, "
                         f"not --vocabulary {args.vocabulary}")
    matmul_size = 256 if args.smoke else 2048
    speed_before = bible.matmul_gflops(matmul_size)
    models = {}
    for name in NAMES:
        keras.utils.set_random_seed(0)
        model = build_model(name, recipe, (tokenizer, tokenizer), bible.POSITIONS,
                            recipe.max_output_pieces, norm_first=True)
        batch = synthetic_batch(args.vocabulary, args.batch, args.length,
                                guided=name.endswith("guided"))
        dataset = tf.data.Dataset.from_tensors(batch).repeat()
        model.fit(dataset, steps_per_epoch=2, epochs=1, verbose=0)  # traced, not timed
        models[name] = (model, dataset, [])
    for _ in range(args.rounds):
        for name in NAMES:
            model, dataset, seconds = models[name]
            model.fit(dataset, steps_per_epoch=args.steps, epochs=1, verbose=0,
                      callbacks=[StepClock(seconds)])
    speed_after = bible.matmul_gflops(matmul_size)
    medians = {name: float(np.median(models[name][2])) for name in NAMES}
    print(f"batch {args.batch} x {args.length} x {args.length} pieces, {args.vocabulary:,} ids, "
          f"{args.rounds} rounds of {args.steps} steps each, alternating")
    for name in NAMES:
        print(f"{name:<20} median {medians[name]:.3f} s/step "
              f"({len(models[name][2])} steps, {min(models[name][2]):.3f}-"
              f"{max(models[name][2]):.3f})")
    print(f"guided / unguided: {medians['transformer_guided'] / medians['transformer']:.3f}")
    print(f"float32 matmul {matmul_size} x {matmul_size}: {speed_before} GFLOP/s before, "
          f"{speed_after} after")
    return medians


if __name__ == "__main__":
    main()
