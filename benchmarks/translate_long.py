"""Translating many long texts: where the time goes, before and after (issue 21, item 8).

    .venv/bin/python benchmarks/translate_long.py --model runs/bible/transformer/model.keras \
        --verses 500

Translates the first `--verses` verses of the SWORD test split (or the lines
of `--texts FILE`) greedily and with beam search (4 beams) under several
translator settings, side by side in one process, and prints for each: the
time of a first pass (traces and XLA compiles included), of a second pass
over the same texts (every shape already compiled), their difference (the
compile cost), the number of compiled shapes and the time per 1,000 texts.

Settings (all `kerasseq.SearchConfig` fields):

- `before`: the translator as it was: source columns padded to a multiple
  of 8 (`source_buckets="multiple"`), the search and the Transformer's
  self-attention cache sized to the whole position table
  (`max_length=256`);
- `cache 200`: the same with `max_length=200` (before this change the cache
  still had 256 positions; now `encode(max_length=...)` sizes it to 200);
- `geometric`: fewer source buckets (8, 16, 24, 32, 48, 64, 96, 128, ...);
- `after`: geometric buckets and a length limit tied to the source,
  `max_length_a=2, max_length_b=10` (at most 2 S + 10 tokens for sources
  padded to S);
- `after, no XLA`: the same without XLA (`jit_compile=False`);
- `after, XLA`: the same with XLA on any device (`jit_compile=True`;
  `after` leaves it to `"auto"`: XLA on a GPU, none on a CPU).
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from kerasseq import Translator  # noqa: E402

AFTER = dict(source_buckets="geometric", max_length=200, max_length_a=2.0, max_length_b=10)
SETTINGS = {
    "before": dict(source_buckets="multiple", max_length=256),
    "cache 200": dict(source_buckets="multiple", max_length=200),
    "geometric": dict(source_buckets="geometric", max_length=200),
    "after": AFTER,
    "after, no XLA": {**AFTER, "jit_compile": False},
    # "after" is jit_compile="auto": XLA on a GPU, none on a CPU; this one asks for XLA anywhere
    "after, XLA": {**AFTER, "jit_compile": True},
}


def load_texts(args):
    if args.texts:
        with open(args.texts, encoding="utf-8") as handle:
            return [line.rstrip("\n") for line in handle if line.strip()][: args.verses]
    from kerasseq.data.sword import load_bible_pairs

    return [pair.source for pair in load_bible_pairs(split="test")][: args.verses]


def run(model, texts, settings, method):
    translator = Translator(model, method=method, num_beams=4, batch_size=64,
                            max_source_length=256, **settings)
    started = time.perf_counter()
    first = translator.translate(texts)
    first_seconds = time.perf_counter() - started
    started = time.perf_counter()
    second = translator.translate(texts)
    second_seconds = time.perf_counter() - started
    assert first == second
    return {"first": first_seconds, "second": second_seconds, "shapes": translator.trace_count,
            "translations": first}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a trained .keras translation model")
    parser.add_argument("--texts", help="a file of source texts, one per line "
                                        "(default: the SWORD test split)")
    parser.add_argument("--verses", type=int, default=500)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--methods", nargs="+", default=["greedy", "beam"])
    args = parser.parse_args(argv)
    model = keras.models.load_model(args.model)
    texts = load_texts(args)
    print(f"{len(texts)} texts, {type(model).__name__} {model.name!r}")
    print(f"{'setting':<15} {'method':<7} {'1st pass s':>10} {'2nd pass s':>10} "
          f"{'compile s':>9} {'shapes':>6} {'s / 1000 (1st)':>15} {'s / 1000 (2nd)':>15}")
    results = {}
    for method in args.methods:
        reference = None
        for name in args.settings:
            result = run(model, texts, SETTINGS[name], method)
            results[(name, method)] = result
            per_1000 = 1000 / len(texts)
            changed = "" if reference is None else (
                f"  ({sum(a != b for a, b in zip(reference, result['translations'], strict=True))}"
                " translations differ from the first setting)")
            reference = reference or result["translations"]
            print(f"{name:<15} {method:<7} {result['first']:>10.1f} {result['second']:>10.1f} "
                  f"{result['first'] - result['second']:>9.1f} {result['shapes']:>6} "
                  f"{result['first'] * per_1000:>15.1f} {result['second'] * per_1000:>15.1f}"
                  f"{changed}", flush=True)
        base = results[(args.settings[0], method)]["first"]
        for name in args.settings[1:]:
            print(f"  {method}: {args.settings[0]} / {name} (first pass) = "
                  f"{base / results[(name, method)]['first']:.2f}x")
    return results


if __name__ == "__main__":
    main()
