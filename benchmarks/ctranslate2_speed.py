"""CTranslate2 beside kerasseq's `Translator`: time per call, same tokens, int8.

Two parts, each timed in interleaved rounds (every engine once per round, the
median reported), on CPU:

1. Synthetic: an untrained `build_transformer_seq2seq` (default 3 + 3 layers,
   d_model 256, vocabulary 1000), 20-token sources, exactly `max_length - 1`
   new tokens per sentence (the end and padding tokens made unreachable, as
   `benchmarks/decode_speed.py` does), at batch 1, 32 and 128; beam-4 (the
   default search) at every batch size and greedy at batch 1. Engines:
   `Translator` with `jit_compile="auto"` (on a CPU: no XLA) and with XLA
   (`jit_compile=True`), and CTranslate2 float32 and int8 with 1 and 2
   threads (`intra_threads`; `inter_threads=1`). The first call of each
   engine and shape (the `Translator`'s trace or XLA compile, CTranslate2's
   load) is reported apart: "first s".
2. A trained model's dev set: `--model PATH` (a kerasseq Transformer with
   tokenizers, e.g. a `kerasseq train --model transformer` run), else a small
   G2P Transformer trained here on CMUdict for `--train-epochs` epochs. Its
   dev words are translated text in, text out (beam 4, the defaults) by the
   `Translator` (jit auto and XLA) and by CTranslate2 float32 and int8, with
   the WER of each (for a G2P model): the int8 quality cost.

The ratios printed are time(engine) / time(reference). The timings depend on
the machine's load: on a shared machine read them as rough, and compare
rows of one run only (the script prints the load average before and after).

Usage:

    .venv/bin/python benchmarks/ctranslate2_speed.py              # 15 minutes on 2 busy cores
    .venv/bin/python benchmarks/ctranslate2_speed.py --quick      # a smaller model, fewer rounds
    .venv/bin/python benchmarks/ctranslate2_speed.py --model runs/t --dev-words 2000
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from kerasseq import SearchConfig, Translator  # noqa: E402
from kerasseq.data import TextTokenizer  # noqa: E402
from kerasseq.data.tokenizer import END_ID, PAD_ID  # noqa: E402
from kerasseq.export import CTranslate2Translator, export_ctranslate2  # noqa: E402
from kerasseq.models import build_transformer_seq2seq  # noqa: E402

SETTINGS = {
    "full": dict(num_layers=3, d_model=256, num_heads=4, dff=1024, vocab_size=1000,
                 source_length=20, max_length=32, rounds=3, batches=(1, 32, 128)),
    "quick": dict(num_layers=2, d_model=64, num_heads=4, dff=256, vocab_size=200,
                  source_length=20, max_length=32, rounds=3, batches=(1, 32, 128)),
}
CT2_ENGINES = [(quantization, threads) for quantization in ("float32", "int8")
               for threads in (1, 2)]


def ct2_name(quantization, threads):
    return f"CT2 {quantization} {threads}t"


def synthetic_model(settings):
    keras.utils.set_random_seed(0)
    tokens = [f"t{index}" for index in range(settings["vocab_size"] - 4)]
    tokenizer = TextTokenizer(vocabulary=tokens, split="whitespace")
    model = build_transformer_seq2seq(
        num_layers=settings["num_layers"], d_model=settings["d_model"],
        num_heads=settings["num_heads"], dff=settings["dff"], dropout=0.0,
        max_positions=settings["max_length"], source_tokenizer=tokenizer,
        target_tokenizer=tokenizer)
    bias = model.output_projection.bias
    value = np.random.default_rng(0).normal(0.0, 0.5, size=bias.shape[0]).astype(np.float32)
    value[[PAD_ID, END_ID]] = -1e4  # every engine generates exactly max_length - 1 tokens
    bias.assign(value)
    return model, tokenizer.get_vocabulary()


def timed(function):
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def interleaved(engines, rounds):
    """`{name: (first call s, median s, output of the first call)}`."""
    first, outputs, times = {}, {}, {name: [] for name in engines}
    for name, function in engines.items():
        first[name], outputs[name] = timed(function)
    for _ in range(rounds):
        for name, function in engines.items():
            times[name].append(timed(function)[0])
    return {name: (first[name], statistics.median(times[name]), outputs[name]) for name in engines}


def print_table(results, reference_names):
    header = "| engine | first s | median s | " + " | ".join(
        f"÷ {name}" for name in reference_names) + " |"
    print(header)
    print("|---|---:|---:|" + "---:|" * len(reference_names))
    for name, (first, median, _) in results.items():
        ratios = " | ".join(f"{median / results[reference][1]:.2f}" for reference in reference_names)
        print(f"| {name} | {first:.2f} | {median:.4f} | {ratios} |")


def synthetic(settings, directory):
    model, vocabulary = synthetic_model(settings)
    num_new = settings["max_length"] - 1
    paths = {quantization: export_ctranslate2(model, os.path.join(directory, quantization),
                                              None if quantization == "float32" else quantization)
             for quantization in ("float32", "int8")}
    rng = np.random.default_rng(1)
    summary = {}
    for batch in settings["batches"]:
        source_ids = rng.integers(END_ID + 1, settings["vocab_size"],
                                  size=(batch, settings["source_length"]))
        tokens = [[vocabulary[index] for index in row] for row in source_ids]
        for method in (("beam", "greedy") if batch == 1 else ("beam",)):
            config = SearchConfig(method=method, num_beams=4, max_length=num_new,
                                  min_length=num_new, batch_size=max(batch, 1))
            engines = {}
            for label, jit in (("Translator (jit auto)", "auto"), ("Translator XLA", True)):
                translator = Translator(model, config.replace(jit_compile=jit))
                engines[label] = (lambda translator=translator, source_ids=source_ids:
                                  translator.generate(source_ids)[0][:, 0])
            for quantization, threads in CT2_ENGINES:
                client = CTranslate2Translator(paths[quantization], config,
                                               intra_threads=threads)
                options = dict(client.options, min_decoding_length=num_new, return_scores=False)

                def run(client=client, options=options, tokens=tokens):
                    results = client.translator.translate_batch(tokens, **options)
                    return np.array([client.target_ids(result.hypotheses[0])
                                     for result in results])
                engines[ct2_name(quantization, threads)] = run
            print(f"\n### {method}{'-4' if method == 'beam' else ''}, batch {batch} "
                  f"({batch * num_new} new tokens per call)\n", flush=True)
            results = interleaved(engines, settings["rounds"])
            print_table(results, ["Translator (jit auto)", "Translator XLA", "CT2 float32 2t"])
            same = np.mean(np.all(results["Translator (jit auto)"][2]
                                  == results["CT2 float32 2t"][2], axis=1))
            print(f"\nsame tokens, Translator vs CT2 float32: {same:.0%} of sentences")
            summary[(method, batch)] = {name: median for name, (_, median, _) in results.items()}
    print("\n### Translator / CTranslate2 float32 (2 threads), median times\n")
    print("| search, batch | jit auto | XLA |\n|---|---:|---:|")
    for (method, batch), medians in summary.items():
        reference = medians["CT2 float32 2t"]
        print(f"| {method}, {batch} | {medians['Translator (jit auto)'] / reference:.2f} | "
              f"{medians['Translator XLA'] / reference:.2f} |")


def trained_model(args):
    """`(model, dev words, references)`: `--model`, or a small G2P Transformer trained here."""
    from kerasseq.data import entries_to_pairs, load_cmudict, make_dataset
    from kerasseq.training import MaskedSparseCategoricalCrossentropy

    dev = load_cmudict("dev")[:args.dev_words]  # (word, [pronunciations])
    words, references = [word for word, _ in dev], [pronunciations for _, pronunciations in dev]
    if args.model:
        path = os.path.join(args.model, "model.keras") if os.path.isdir(args.model) else args.model
        return keras.models.load_model(path), words, references, path
    keras.utils.set_random_seed(0)
    pairs = entries_to_pairs(load_cmudict("train"))[:args.train_words]
    source = TextTokenizer.from_texts([word for word, _ in pairs], split="character")
    target = TextTokenizer.from_texts([phones for _, phones in pairs], split="whitespace")
    model = build_transformer_seq2seq(num_layers=2, d_model=128, num_heads=4, dff=512,
                                      dropout=0.1, max_positions=32, source_tokenizer=source,
                                      target_tokenizer=target)
    model.compile(optimizer=keras.optimizers.Adam(1e-3, clipnorm=1.0),
                  loss=MaskedSparseCategoricalCrossentropy())
    seconds, _ = timed(lambda: model.fit(make_dataset(pairs, source, target, batch_size=64,
                                                      seed=0),
                                         epochs=args.train_epochs, verbose=0))
    label = (f"G2P Transformer trained here: 2 + 2 layers, d_model 128, {len(pairs)} CMUdict "
             f"words, {args.train_epochs} epochs ({seconds:.0f} s)")
    return model, words, references, label


def dev_set(args, directory):
    from kerasseq.evaluation import g2p_error_rates

    model, words, references, label = trained_model(args)
    print(f"\n## A trained model's dev set: {label}; {len(words)} dev words, text in and out, "
          "beam 4 (the defaults)\n", flush=True)
    paths = {quantization: export_ctranslate2(model, os.path.join(directory, f"dev_{quantization}"),
                                              None if quantization == "float32" else quantization)
             for quantization in ("float32", "int8")}
    engines = {}
    for label, jit in (("Translator (jit auto)", "auto"), ("Translator XLA", True)):
        translator = Translator(model, jit_compile=jit)
        engines[label] = lambda translator=translator: translator.translate(words)
    for quantization, threads in CT2_ENGINES:
        client = CTranslate2Translator(paths[quantization], intra_threads=threads)
        engines[ct2_name(quantization, threads)] = lambda client=client: client.translate(words)
    results = interleaved(engines, args.dev_rounds)
    print_table(results, ["Translator (jit auto)", "Translator XLA", "CT2 float32 2t"])
    expected = results["Translator (jit auto)"][2]
    print("\n| engine | WER | PER | same output as the Translator |\n|---|---:|---:|---:|")
    for name, (_, _, hypotheses) in results.items():
        rates = g2p_error_rates(hypotheses, references)
        same = np.mean([a == b for a, b in zip(hypotheses, expected, strict=True)])
        print(f"| {name} | {rates['wer']:.2%} | {rates['per']:.2%} | {same:.1%} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller synthetic model")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (median)")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--skip-dev", action="store_true")
    parser.add_argument("--model", default=None,
                        help="a trained kerasseq G2P Transformer (.keras or run directory)")
    parser.add_argument("--dev-words", type=int, default=300)
    parser.add_argument("--dev-rounds", type=int, default=2)
    parser.add_argument("--train-words", type=int, default=3000)
    parser.add_argument("--train-epochs", type=int, default=3)
    args = parser.parse_args(argv)
    settings = dict(SETTINGS["quick" if args.quick else "full"])
    if args.rounds:
        settings["rounds"] = args.rounds
    import ctranslate2
    import tensorflow as tf

    start = time.perf_counter()
    print(f"CTranslate2 {ctranslate2.__version__}, TensorFlow {tf.__version__}, "
          f"{os.cpu_count()} CPUs, load average before {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as directory:
        if not args.skip_synthetic:
            print(f"\n## Synthetic: {settings['num_layers']} + {settings['num_layers']} layers, "
                  f"d_model {settings['d_model']}, vocabulary {settings['vocab_size']}, "
                  f"{settings['source_length']}-token sources, {settings['max_length'] - 1} new "
                  f"tokens, {settings['rounds']} interleaved rounds")
            synthetic(settings, directory)
        if not args.skip_dev:
            dev_set(args, directory)
    print(f"\nload average after {os.getloadavg()}; wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
