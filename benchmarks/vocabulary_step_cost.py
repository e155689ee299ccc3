"""What a smaller shared vocabulary costs per training step of the Bible Transformer.

`examples/spanish_to_english_bible.py --shared-vocabulary-size N` learns one
WordPiece vocabulary of at most N ids for both languages: fewer ids make the
embedding and the output projection smaller, and the verses longer in
pieces. Which wins depends on the machine, so this script measures it on
the real data: for each size in `--sizes` it learns the vocabulary on the
training verses (the example's `make_tokenizers`), batches them as the
example does (64 verses, length buckets, at most 100 pieces a side, seed 0)
and builds the example's model (`build_model`, its defaults). The models then
alternate for `--rounds` rounds, each training `--steps` steps on its own
next batches (an untimed warm-up `fit` first traces every batch shape), and
the script prints, per size: the mean seconds per step, the mean padded
pieces per batch (of the epoch, and of the timed batches) and the batches
per epoch; then each size's seconds per epoch over the first size's, and
the steps at equal training-step time for the first size's 5,394 (the
33.72 run's steps; its minutes also held each epoch's dev scoring, which
this does not time). The timed batches are the first of one shuffled
epoch: a sample, whose mean pieces say how far it is from the epoch's.

Needs the SWORD modules of `make examples-data` and tensorflow-text.

    .venv/bin/python benchmarks/vocabulary_step_cost.py             # ~8 minutes on 2 cores
    .venv/bin/python benchmarks/vocabulary_step_cost.py --smoke     # a slice, a tiny model
"""

import argparse
import itertools
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # guided_step_cost's StepClock

import keras  # noqa: E402
import numpy as np  # noqa: E402
import spanish_to_english_bible as bible  # noqa: E402
import tensorflow as tf  # noqa: E402
from _translation_common import build_model  # noqa: E402
from guided_step_cost import StepClock  # noqa: E402

from kerasseq.data import batch_shapes, make_dataset  # noqa: E402
from kerasseq.data.sword import SwordError, load_bible_pairs  # noqa: E402

BASE_STEPS = 5394  # the 33.72 run's steps in its 90 minutes (docs/results.md)


def batches_dataset(batches, spec):
    """A dataset of the given `(inputs, target_out)` batches, in order, once."""
    dataset = tf.data.Dataset.from_generator(lambda: iter(batches), output_signature=spec)
    return dataset.apply(tf.data.experimental.assert_cardinality(len(batches)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8000, 4000],
                        help="--shared-vocabulary-size values; the first is the reference")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="400 verses, a tiny model")
    args = parser.parse_args(argv)
    try:
        pairs = load_bible_pairs("spaRV1909eb", "engWEB2015eb")
    except SwordError as error:
        print(f"Skipping: {error}")
        return None
    train = [pair for pair in pairs if pair.split == "train"]
    flags = []
    if args.smoke:
        train, args.rounds, args.steps = train[:400], 2, 2
        args.sizes = [min(size, 600) // (index + 1) for index, size in enumerate(args.sizes)]
        flags = ["--layers", "1", "--d-model", "16", "--heads", "2", "--dff", "32"]
    matmul_size = 256 if args.smoke else 2048
    speed_before = bible.matmul_gflops(matmul_size)
    runs = {}
    for size in args.sizes:
        recipe = bible.make_parser().parse_args(flags + ["--shared-vocabulary-size", str(size)])
        tokenizers = bible.make_tokenizers(train, 0, 0, size)
        data = make_dataset([(pair.source, pair.target) for pair in train], *tokenizers,
                            batch_size=recipe.batch_size, seed=recipe.seed,
                            bucket_boundaries="auto", max_source_length=recipe.max_pieces,
                            max_target_length=recipe.max_pieces)
        shapes = batch_shapes(data)
        pieces = [rows * length for ((rows, length), _, _), count in shapes.items()
                  for _ in range(count)]
        keras.utils.set_random_seed(0)
        model = build_model("transformer", recipe, tokenizers, bible.POSITIONS,
                            recipe.max_output_pieces, norm_first=True)
        # every shape once, untimed (tracing), then an endless stream of the epoch's batches
        firsts = {}
        for batch in data:
            firsts.setdefault(tuple(batch[1].shape), batch)
        model.fit(batches_dataset(list(firsts.values()), data.element_spec), epochs=1,
                  verbose=0)
        stream = iter(itertools.cycle(data))
        runs[size] = {"model": model, "stream": stream, "seconds": [],
                      "ids": tokenizers[0].vocabulary_size, "batches": len(pieces), "timed_pieces": [],
                      "pieces": float(np.mean(pieces)), "spec": data.element_spec}
    for _ in range(args.rounds):
        for run in runs.values():
            batches = [next(run["stream"]) for _ in range(args.steps)]
            run["timed_pieces"] += [int(labels.shape[0]) * int(labels.shape[1])
                                    for _, labels in batches]
            run["model"].fit(batches_dataset(batches, run["spec"]), epochs=1, verbose=0,
                             callbacks=[StepClock(run["seconds"])])
    speed_after = bible.matmul_gflops(matmul_size)
    print(f"{len(train):,} training verses; {args.rounds} rounds of {args.steps} steps per "
          "vocabulary, alternating")
    first = runs[args.sizes[0]]
    for size, run in runs.items():
        run["step"] = float(np.mean(run["seconds"]))
        epoch_ratio = run["step"] * run["batches"] / (first["step"] * first["batches"])
        print(f"--shared-vocabulary-size {size}: {run['ids']:,} ids, {run['batches']} batches "
              f"per epoch of {run['pieces']:.0f} padded pieces on average; {run['step']:.3f} s "
              f"per step ({len(run['seconds'])} steps of {np.mean(run['timed_pieces']):.0f} "
              f"padded pieces on average); epoch / first size's epoch {epoch_ratio:.3f}; "
              f"{BASE_STEPS * first['step'] / run['step']:,.0f} steps at the step time of the "
              f"first size's {BASE_STEPS:,}")
    print(f"float32 matmul {matmul_size} x {matmul_size}: {speed_before} GFLOP/s before, "
          f"{speed_after} after")
    return runs


if __name__ == "__main__":
    main()
