"""Training throughput: kerasseq's Transformer vs the same model from keras-hub layers.

Three comparisons (`--comparison layers|bucketed|pipelines|all`, default all):

1. Layers only, fixed shapes. Every model is trained with `model.fit` on the
   same CMUdict G2P batches (`kerasseq.data.make_dataset`, padded to fixed
   `(batch, 24)` shapes so that XLA compiles one program; about a third of the
   positions are real tokens), with the same batch size, optimizer and loss.
   This measures the layers and nothing else. Two models: kerasseq and
   keras-hub. (Until the training-time padding skip was removed from
   kerasseq, a third model, "kerasseq, no skip", ablated it; see
   benchmarks/README.md.)

2. Layers only, bucketed. The same two models on the same length-bucketed
   batches (`make_dataset(bucket_boundaries="auto")`, about 90 % real
   positions, the batches kerasseq's CLI trains on), `jit_compile=False` only.

3. End-to-end training pipelines. Each model is trained on the batches its
   library's own G2P pipeline produces from the same first `pairs` pairs of
   the seed-0 shuffled CMUdict training pairs: kerasseq on
   `make_dataset(pairs, ..., bucket_boundaries="auto", seed=0)`
   (length-bucketed batches, each padded to its own longest sequence, as
   `examples/g2p_cmudict.py` trains), keras-hub on the keras.io KerasHub
   translation recipe's fixed shapes (every source padded to 32 tokens; every
   target packed as `[START] phonemes [END]` into 34 tokens and split into
   decoder inputs `[:-1]` and labels `[1:]`, 33 tokens each). Same pairs, so
   the same real target tokens; same batch size, optimizer and loss. Most of
   the gap here comes from the padding that length bucketing avoids, not from
   faster layers (comparisons 1 and 2 measure those). Before timing, each
   model is warmed up with one `fit` over one batch of each distinct batch
   shape of its pipeline, so every shape has been traced / XLA-compiled; the
   number of distinct shapes and the warm-up time are printed but not timed.

The keras-hub model is `keras_hub.layers.TokenAndPositionEmbedding` +
`TransformerEncoder` ×N + `TransformerDecoder` ×N + a Dense projection, with
the same `d_model`, `num_heads`, `dff`, `num_layers` and post-norm; the only
difference in size is keras-hub's learned position table (kerasseq uses the
fixed sinusoidal one).

In each comparison the runs alternate between the models (and `jit_compile`
off / on; the pipelines comparison runs `jit_compile=True` in the full mode
only) for a few rounds after the warm-up `fit`; the script prints every
round and a table of the median throughput in target tokens per second (real,
non-padding tokens of `target_out`) with the ratios to keras-hub.

Run it with TensorFlow on one thread and the process free to use both cores
(`TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1`, no `taskset`): the
model's ops then run on one core, and the tf.data and Python threads do not
compete with them. Pinned to a single core, every model stalled at the same
0.511 s/step in some runs (see benchmarks/README.md).

Usage:

    TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 \
        .venv/bin/python benchmarks/train_throughput.py            # full
    .venv/bin/python benchmarks/train_throughput.py --quick    # < ~3 minutes
    .venv/bin/python benchmarks/train_throughput.py --smoke    # tiny model (~1.5 min: tracing)
    .venv/bin/python benchmarks/train_throughput.py --quick --comparison pipelines
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

import kerasseq  # noqa: E402,F401  (backend check)
from kerasseq.data import (  # noqa: E402
    entries_to_pairs,
    load_cmudict,
    load_cmudict_tokenizers,
    make_dataset,
)
from kerasseq.models import build_transformer_seq2seq  # noqa: E402
from kerasseq.training import MaskedSparseCategoricalCrossentropy  # noqa: E402

# `warmup_steps` / `steps`: layers-only comparison. `pairs`: training pairs of
# the pipelines comparison (one epoch of them per timed `fit`). `pipeline_rounds`
# and `pipeline_jit`: its rounds (3 even in --quick: an epoch is short, and the
# median of one round is a single sample) and `jit_compile` settings. Only the
# full mode runs the pipelines with `jit_compile=True`: kerasseq's bucketed
# batches come in 15-20 distinct shapes and XLA compiles the training step once
# per shape (7 shapes took 73 s with XLA vs 7 s without for the smoke model on
# one core), too slow for --quick.
SETTINGS = {
    "full": dict(d_model=128, num_heads=4, dff=512, num_layers=2, batch_size=64,
                 warmup_steps=10, steps=40, rounds=3, pairs=4096,
                 pipeline_rounds=3, pipeline_jit=(False, True)),
    "quick": dict(d_model=128, num_heads=4, dff=512, num_layers=2, batch_size=64,
                  warmup_steps=3, steps=8, rounds=1, pairs=1024,
                  pipeline_rounds=3, pipeline_jit=(False,)),
    "smoke": dict(d_model=16, num_heads=2, dff=32, num_layers=1, batch_size=8,
                  warmup_steps=1, steps=2, rounds=1, pairs=32,
                  pipeline_rounds=2, pipeline_jit=(False,)),
}

# The keras.io KerasHub translation recipe applied to CMUdict (the reference
# point of docs/results.md): every source padded to 32 tokens; every target
# packed as [START] phonemes [END] and padded to 34 tokens, then split into
# decoder inputs [:-1] and labels [1:] of 33 tokens each.
RECIPE_SOURCE_LENGTH = 32
RECIPE_PACKED_TARGET_LENGTH = 34
PIPELINE_MAX_LENGTH = 40  # position tables of both models, as in examples/g2p_cmudict.py


def fixed_shape_batches(settings, count, source_length, target_length):
    """`count` batches of CMUdict pairs, padded to fixed `(batch_size, length)` shapes."""
    entries = load_cmudict("train")[: count * settings["batch_size"] * 2]
    pairs = entries_to_pairs(entries)
    source_tokenizer, target_tokenizer = load_cmudict_tokenizers(entries)
    dataset = make_dataset(pairs, source_tokenizer, target_tokenizer,
                           batch_size=settings["batch_size"], seed=0, drop_remainder=True,
                           max_source_length=source_length, max_target_length=target_length)

    def pad(inputs, target_out):
        source_ids, target_in = inputs

        def to(x, length):
            return tf.pad(x, [[0, 0], [0, length - tf.shape(x)[1]]])

        return ((to(source_ids, source_length), to(target_in, target_length)),
                to(target_out, target_length))

    batches = list(dataset.map(pad).take(count))
    tokens_per_batch = [int(np.sum(np.asarray(target_out) != 0)) for _, target_out in batches]
    return batches, tokens_per_batch, source_tokenizer, target_tokenizer


def kerasseq_model(settings, source_vocab_size, target_vocab_size, max_length):
    return build_transformer_seq2seq(
        source_vocab_size, target_vocab_size, num_layers=settings["num_layers"],
        d_model=settings["d_model"], num_heads=settings["num_heads"], dff=settings["dff"],
        dropout=0.1, max_positions=max_length, name="kerasseq_transformer",
    )


def keras_hub_model(settings, source_vocab_size, target_vocab_size, max_length):
    """The same architecture from keras-hub layers (post-norm, ReLU, dropout 0.1)."""
    d_model, heads, dff = settings["d_model"], settings["num_heads"], settings["dff"]
    source_ids = keras.Input(shape=(None,), dtype="int32", name="source_ids")
    target_in_ids = keras.Input(shape=(None,), dtype="int32", name="target_in_ids")
    source_mask = ops.not_equal(source_ids, 0)
    target_mask = ops.not_equal(target_in_ids, 0)
    # Explicit padding masks (mask_zero=False): no Keras mask reaches the logits,
    # exactly like kerasseq, so both losses weigh tokens the same way.
    x = keras_hub.layers.TokenAndPositionEmbedding(
        source_vocab_size, max_length, d_model, name="source_embedding")(source_ids)
    x = keras.layers.Dropout(0.1)(x)
    for i in range(settings["num_layers"]):
        x = keras_hub.layers.TransformerEncoder(dff, heads, dropout=0.1, name=f"encoder_{i}")(
            x, padding_mask=source_mask)
    y = keras_hub.layers.TokenAndPositionEmbedding(
        target_vocab_size, max_length, d_model, name="target_embedding")(target_in_ids)
    y = keras.layers.Dropout(0.1)(y)
    for i in range(settings["num_layers"]):
        y = keras_hub.layers.TransformerDecoder(dff, heads, dropout=0.1, name=f"decoder_{i}")(
            y, x, decoder_padding_mask=target_mask, encoder_padding_mask=source_mask)
    logits = keras.layers.Dense(target_vocab_size, dtype="float32", name="logits")(y)
    return keras.Model([source_ids, target_in_ids], logits, name="keras_hub_transformer")


# The models of the layers-only comparisons.
LAYERS_BUILDERS = {
    "kerasseq": kerasseq_model,
    "keras-hub": keras_hub_model,
}


def compile_model(model, jit_compile):
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
                  jit_compile=jit_compile)
    return model


def timed_fit(model, batches, steps):
    """Seconds for `fit` over `steps` batches (one epoch, no callbacks)."""
    dataset = tf.data.Dataset.from_tensor_slices(_stack(batches[:steps])).prefetch(2)
    started = time.perf_counter()
    model.fit(dataset, epochs=1, verbose=0)
    return time.perf_counter() - started


def _stack(batches):
    sources = np.stack([np.asarray(b[0][0]) for b in batches])
    targets_in = np.stack([np.asarray(b[0][1]) for b in batches])
    targets_out = np.stack([np.asarray(b[1]) for b in batches])
    return (sources, targets_in), targets_out


def layers_comparison(mode):
    """All models on the same fixed-shape `(batch, 24)` batches: the layers only."""
    settings = SETTINGS[mode]
    keras.utils.set_random_seed(0)
    max_length = 24  # CMUdict: words <= 22 characters, pronunciations <= 20 phonemes + end
    total = settings["warmup_steps"] + settings["steps"]
    batches, tokens, source_tokenizer, target_tokenizer = fixed_shape_batches(
        settings, total, max_length, max_length)
    vocab = (source_tokenizer.vocabulary_size, target_tokenizer.vocabulary_size)
    warmup, measured = batches[: settings["warmup_steps"]], batches[settings["warmup_steps"]:]
    measured_tokens = sum(tokens[settings["warmup_steps"]:])
    real_share = measured_tokens / (len(measured) * settings["batch_size"] * max_length)

    models = {}
    for name, builder in LAYERS_BUILDERS.items():
        for jit in (False, True):
            model = compile_model(builder(settings, *vocab, max_length), jit)
            timed_fit(model, warmup, len(warmup))  # traces / compiles
            models[name, jit] = model
    rates = {key: [] for key in models}
    for _ in range(settings["rounds"]):
        for key, model in models.items():  # side by side, interleaved
            seconds = timed_fit(model, measured, len(measured))
            rates[key].append(measured_tokens / seconds)

    print("== layers only: the same fixed-shape batches for every model ==")
    print(f"mode={mode}  d_model={settings['d_model']} heads={settings['num_heads']} "
          f"dff={settings['dff']} layers={settings['num_layers']} batch={settings['batch_size']} "
          f"shape=({settings['batch_size']}, {max_length})  steps={settings['steps']} "
          f"rounds={settings['rounds']}  (median target tokens/s)")
    print(f"{real_share:.0%} of the target positions hold real tokens")
    _print_parameters(models)
    _print_rounds(rates)
    return _print_table(rates)


def bucketed_layers_comparison(mode):
    """All models on the same length-bucketed batches (little padding), jit off."""
    settings = SETTINGS[mode]
    keras.utils.set_random_seed(0)
    pairs, source_tokenizer, target_tokenizer, _ = benchmark_pairs(settings["pairs"])
    vocab = (source_tokenizer.vocabulary_size, target_tokenizer.vocabulary_size)
    pipeline = Pipeline(make_dataset(pairs, source_tokenizer, target_tokenizer,
                                     batch_size=settings["batch_size"],
                                     bucket_boundaries="auto", seed=0))
    models = {}
    for name, builder in LAYERS_BUILDERS.items():
        model = compile_model(builder(settings, *vocab, PIPELINE_MAX_LENGTH), False)
        model.fit(pipeline.warmup_dataset(), epochs=1, verbose=0)  # every shape traced
        models[name, False] = model
    rates = {key: [] for key in models}
    for _ in range(settings["pipeline_rounds"]):
        for key, model in models.items():  # side by side, interleaved
            started = time.perf_counter()
            model.fit(pipeline.dataset, epochs=1, verbose=0)
            rates[key].append(pipeline.tokens / (time.perf_counter() - started))

    print("== layers only: the same length-bucketed batches for every model (jit off) ==")
    print(f"mode={mode}  batch={settings['batch_size']}  rounds={settings['pipeline_rounds']}  "
          f"make_dataset(bucket_boundaries='auto', seed=0) on {len(pairs):,} pairs: "
          + pipeline.describe())
    _print_rounds(rates)
    return _print_table(rates)


def _print_parameters(models):
    print("parameters: " + "  ".join(
        f"{name} {models[name, False].count_params():,}" for name in LAYERS_BUILDERS
        if (name, False) in models) + " (keras-hub: + learned position tables)")


def _print_rounds(rates):
    print("tok/s of each round: " + ",  ".join(
        f"{name} jit_compile={jit} " + " ".join(f"{rate:,.0f}" for rate in values)
        for (name, jit), values in rates.items()))


def _print_table(rates):
    """Median tok/s per model and jit setting, and kerasseq / keras-hub."""
    names = [name for name in LAYERS_BUILDERS if any(key[0] == name for key in rates)]
    ours = [name for name in names if name != "keras-hub"]
    header = f"{'jit_compile':<12}" + "".join(f"{name + ' tok/s':>24}" for name in names)
    header += "".join(f"{name + ' / keras-hub':>30}" for name in ours)
    print(header)
    results = {}
    for jit in (False, True):
        if not rates.get(("keras-hub", jit)):
            print(f"{str(jit):<12}not run in this mode (see SETTINGS)")
            continue
        medians = {name: statistics.median(rates[name, jit]) for name in names}
        results[jit] = medians
        row = f"{str(jit):<12}" + "".join(f"{medians[name]:>24,.0f}" for name in names)
        row += "".join(f"{medians[name] / medians['keras-hub']:>30.2f}" for name in ours)
        print(row)
    return results


def benchmark_pairs(count):
    """The first `count` pairs of the seed-0 shuffled CMUdict training pairs that
    fit the recipe's fixed shapes without truncation (so both pipelines train on
    exactly the same tokens); also the tokenizers (built on all training words,
    as in examples/g2p_cmudict.py) and how many pairs were skipped on the way."""
    entries = load_cmudict("train")
    source_tokenizer, target_tokenizer = load_cmudict_tokenizers(entries)
    pairs = entries_to_pairs(entries)
    order = np.random.default_rng(0).permutation(len(pairs))
    chosen, skipped = [], 0
    for start in range(0, len(order), 4096):
        chunk = [pairs[index] for index in order[start:start + 4096]]
        source_lengths = source_tokenizer.encode([s for s, _ in chunk]).row_lengths().numpy()
        target_lengths = target_tokenizer.encode([t for _, t in chunk]).row_lengths().numpy()
        for pair, source_length, target_length in zip(
                chunk, source_lengths, target_lengths, strict=True):
            if len(chosen) == count:
                return chosen, source_tokenizer, target_tokenizer, skipped
            if (source_length <= RECIPE_SOURCE_LENGTH
                    and target_length + 2 <= RECIPE_PACKED_TARGET_LENGTH):
                chosen.append(pair)
            else:
                skipped += 1
    if len(chosen) < count:
        raise ValueError(f"only {len(chosen)} CMUdict training pairs fit; asked for {count}")
    return chosen, source_tokenizer, target_tokenizer, skipped


def recipe_dataset(pairs, source_tokenizer, target_tokenizer, batch_size):
    """The keras.io KerasHub recipe's batches: fixed `(batch, 32)` sources and
    `(batch, 33)` decoder inputs / labels (a 34-token packed target, split)."""
    target_length = RECIPE_PACKED_TARGET_LENGTH - 1
    dataset = make_dataset(pairs, source_tokenizer, target_tokenizer,
                           batch_size=batch_size, seed=0)

    def pad(inputs, target_out):
        source_ids, target_in = inputs

        def to(x, length):
            x = tf.pad(x, [[0, 0], [0, length - tf.shape(x)[1]]])
            return tf.ensure_shape(x, [None, length])  # static length, like StartEndPacker

        return ((to(source_ids, RECIPE_SOURCE_LENGTH), to(target_in, target_length)),
                to(target_out, target_length))

    return dataset.map(pad)


class Pipeline:
    """One epoch of a pipeline, cached so that every later epoch (every timed
    `fit`) replays the same batches in the same order, and its statistics."""

    def __init__(self, dataset):
        cached = dataset.cache()
        self.shape_counts, self.firsts, sequence = {}, {}, []
        self.steps = self.tokens = self.positions = 0
        for batch in cached:  # the full first epoch fills the cache
            (source_ids, target_in), target_out = batch
            shape = (tuple(source_ids.shape), tuple(target_in.shape))
            self.shape_counts[shape] = self.shape_counts.get(shape, 0) + 1
            self.firsts.setdefault(shape, batch)
            self.steps += 1
            self.tokens += int(np.count_nonzero(target_out.numpy()))
            self.positions += int(np.prod(target_out.shape))
            sequence.append((shape, int(np.sum(target_out.numpy()))))
        # Known length: `fit` stops after the last batch instead of probing for more.
        self.dataset = cached.apply(tf.data.experimental.assert_cardinality(self.steps))
        replayed = [((tuple(s.shape), tuple(t.shape)), int(np.sum(o.numpy())))
                    for (s, t), o in self.dataset]
        if replayed != sequence:  # every timed epoch must see the warmed-up shapes
            raise AssertionError("the cached pipeline does not replay the same batches")

    def warmup_dataset(self):
        """One batch of each distinct shape, with the element spec of `dataset`
        (so `fit` on `dataset` reuses the traced function)."""
        batches = list(self.firsts.values())
        dataset = tf.data.Dataset.from_generator(
            lambda: iter(batches), output_signature=self.dataset.element_spec)
        return dataset.apply(tf.data.experimental.assert_cardinality(len(batches)))

    def describe(self):
        target_lengths = sorted({shape[1][1] for shape in self.shape_counts})
        shapes = len(self.shape_counts)
        return (f"{self.steps} steps, {shapes} distinct batch shape{'s' * (shapes != 1)}, "
                f"padded target lengths {target_lengths[0]}-{target_lengths[-1]}, "
                f"{self.tokens / self.positions:.0%} of target positions are real tokens")


def pipelines_comparison(mode):
    """Each model on its own library's pipeline, same pairs: what a user gets."""
    settings = SETTINGS[mode]
    keras.utils.set_random_seed(0)
    batch_size = settings["batch_size"]
    pairs, source_tokenizer, target_tokenizer, skipped = benchmark_pairs(settings["pairs"])
    vocab = (source_tokenizer.vocabulary_size, target_tokenizer.vocabulary_size)
    pipelines = {
        "kerasseq": Pipeline(make_dataset(pairs, source_tokenizer, target_tokenizer,
                                          batch_size=batch_size, bucket_boundaries="auto",
                                          seed=0)),
        "keras-hub": Pipeline(recipe_dataset(pairs, source_tokenizer, target_tokenizer,
                                             batch_size)),
    }
    tokens = pipelines["kerasseq"].tokens
    if pipelines["keras-hub"].tokens != tokens:
        raise AssertionError(f"real target tokens differ: {pipelines['keras-hub'].tokens} "
                             f"(keras-hub) vs {tokens} (kerasseq)")

    builders = {"kerasseq": kerasseq_model, "keras-hub": keras_hub_model}
    models, warmup_seconds = {}, {}
    for name, builder in builders.items():
        for jit in settings["pipeline_jit"]:
            model = compile_model(builder(settings, *vocab, PIPELINE_MAX_LENGTH), jit)
            started = time.perf_counter()  # traces / compiles every batch shape
            model.fit(pipelines[name].warmup_dataset(), epochs=1, verbose=0)
            warmup_seconds[name, jit] = time.perf_counter() - started
            models[name, jit] = model
    rates = {key: [] for key in models}
    for _ in range(settings["pipeline_rounds"]):
        for (name, jit), model in models.items():  # side by side, interleaved
            started = time.perf_counter()
            model.fit(pipelines[name].dataset, epochs=1, verbose=0)
            rates[name, jit].append(tokens / (time.perf_counter() - started))

    print("== end-to-end training pipelines: each model on its own library's CMUdict "
          "G2P batches ==")
    print("   (credits kerasseq's length bucketing, i.e. less padding; not faster layers)")
    print(f"mode={mode}  d_model={settings['d_model']} heads={settings['num_heads']} "
          f"dff={settings['dff']} layers={settings['num_layers']} batch={batch_size} "
          f"rounds={settings['pipeline_rounds']}  (median real target tokens/s)")
    print(f"pairs: the first {len(pairs):,} of the seed-0 shuffled CMUdict training pairs "
          f"that fit 32 / 34 tokens ({skipped} skipped); {tokens:,} real target tokens "
          "per epoch for both")
    print("kerasseq  make_dataset(bucket_boundaries='auto', seed=0): "
          + pipelines["kerasseq"].describe())
    print(f"keras-hub recipe (sources {RECIPE_SOURCE_LENGTH}, targets packed to "
          f"{RECIPE_PACKED_TARGET_LENGTH}, decoder inputs / labels "
          f"{RECIPE_PACKED_TARGET_LENGTH - 1}): " + pipelines["keras-hub"].describe())
    print(f"parameters: kerasseq {models['kerasseq', False].count_params():,}  "
          f"keras-hub {models['keras-hub', False].count_params():,} "
          "(+ learned position tables)")
    print("warm-up fit over one batch of each distinct shape (not timed): " + ",  ".join(
        f"{name} jit_compile={jit} {seconds:.1f} s"
        for (name, jit), seconds in warmup_seconds.items()))
    _print_rounds(rates)
    return _print_table(rates)


COMPARISONS = {
    "layers": layers_comparison,
    "bucketed": bucketed_layers_comparison,
    "pipelines": pipelines_comparison,
}


def run(mode, comparison="all"):
    names = list(COMPARISONS) if comparison == "all" else [comparison]
    results = {}
    for index, name in enumerate(names):
        if index:
            print()
        results[name] = COMPARISONS[name](mode)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true",
                       help="fewer steps / pairs (< ~3 min on one core)")
    group.add_argument("--smoke", action="store_true", help="tiny model, a few steps (tests)")
    parser.add_argument("--comparison", choices=[*COMPARISONS, "all"], default="all",
                        help="layers: the same fixed-shape batches for every model; "
                             "bucketed: the same length-bucketed batches (jit off); "
                             "pipelines: each model on its own library's pipeline "
                             "(default: all three)")
    args = parser.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    started = time.perf_counter()
    results = run(mode, args.comparison)
    print(f"total {time.perf_counter() - started:.0f} s")
    return results


if __name__ == "__main__":
    main()
