"""Training throughput: kerasseq's Transformer vs the same model from keras-hub layers.

Both models are trained with `model.fit` on the same CMUdict G2P batches
(`kerasseq.data.make_dataset`, padded to fixed shapes so that XLA compiles one
program), with the same batch size, optimizer and loss. The keras-hub model is
`keras_hub.layers.TokenAndPositionEmbedding` + `TransformerEncoder` ×N +
`TransformerDecoder` ×N + a Dense projection, with the same `d_model`,
`num_heads`, `dff`, `num_layers` and post-norm; the only difference in size is
keras-hub's learned position table (kerasseq uses the fixed sinusoidal one).

Runs alternate between the two models (and `jit_compile` off / on) for
`--rounds` rounds after a warm-up `fit`, and the table shows the median
throughput in target tokens per second (real, non-padding tokens of
`target_out`) and the ratio kerasseq / keras-hub.

Usage:

    .venv/bin/python benchmarks/train_throughput.py            # full
    .venv/bin/python benchmarks/train_throughput.py --quick    # < 2 minutes
    .venv/bin/python benchmarks/train_throughput.py --smoke    # tiny, seconds
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

SETTINGS = {
    "full": dict(d_model=128, num_heads=4, dff=512, num_layers=2, batch_size=64,
                 warmup_steps=10, steps=40, rounds=3),
    "quick": dict(d_model=128, num_heads=4, dff=512, num_layers=2, batch_size=64,
                  warmup_steps=3, steps=8, rounds=1),
    "smoke": dict(d_model=16, num_heads=2, dff=32, num_layers=1, batch_size=8,
                  warmup_steps=1, steps=2, rounds=1),
}


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
        dropout=0.1, max_length=max_length, name="kerasseq_transformer",
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


def run(mode):
    settings = SETTINGS[mode]
    keras.utils.set_random_seed(0)
    max_length = 24  # CMUdict: words <= 22 characters, pronunciations <= 20 phonemes + end
    total = settings["warmup_steps"] + settings["steps"]
    batches, tokens, source_tokenizer, target_tokenizer = fixed_shape_batches(
        settings, total, max_length, max_length)
    vocab = (source_tokenizer.vocabulary_size, target_tokenizer.vocabulary_size)
    warmup, measured = batches[: settings["warmup_steps"]], batches[settings["warmup_steps"]:]
    measured_tokens = sum(tokens[settings["warmup_steps"]:])

    builders = {"kerasseq": kerasseq_model, "keras-hub": keras_hub_model}
    models = {}
    for name, builder in builders.items():
        for jit in (False, True):
            model = compile_model(builder(settings, *vocab, max_length), jit)
            timed_fit(model, warmup, len(warmup))  # traces / compiles
            models[name, jit] = model
    rates = {key: [] for key in models}
    for _ in range(settings["rounds"]):
        for key, model in models.items():  # side by side, interleaved
            seconds = timed_fit(model, measured, len(measured))
            rates[key].append(measured_tokens / seconds)

    print(f"mode={mode}  d_model={settings['d_model']} heads={settings['num_heads']} "
          f"dff={settings['dff']} layers={settings['num_layers']} batch={settings['batch_size']} "
          f"shape=({settings['batch_size']}, {max_length})  steps={settings['steps']} "
          f"rounds={settings['rounds']}  (median target tokens/s)")
    print(f"parameters: kerasseq {models['kerasseq', False].count_params():,}  "
          f"keras-hub {models['keras-hub', False].count_params():,} "
          "(+ learned position tables)")
    print(f"{'jit_compile':<12}{'kerasseq tok/s':>16}{'keras-hub tok/s':>17}{'ratio':>8}")
    results = {}
    for jit in (False, True):
        ours = statistics.median(rates["kerasseq", jit])
        theirs = statistics.median(rates["keras-hub", jit])
        results[jit] = (ours, theirs)
        print(f"{str(jit):<12}{ours:>16,.0f}{theirs:>17,.0f}{ours / theirs:>8.2f}")
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="fewer steps, one round (< 2 min)")
    group.add_argument("--smoke", action="store_true", help="tiny model, 2 steps (tests)")
    args = parser.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    started = time.perf_counter()
    results = run(mode)
    print(f"total {time.perf_counter() - started:.0f} s")
    return results


if __name__ == "__main__":
    main()
