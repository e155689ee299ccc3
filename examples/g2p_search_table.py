"""G2P search levers measured on dev: beam width, length penalty, ensemble size.

    # three runs of examples/g2p_cmudict.py (or `kerasseq train`), e.g. other seeds
    .venv/bin/python examples/g2p_search_table.py \\
        --model runs/g2p_a/averaged.keras --model runs/g2p_b/averaged.keras \\
        --model runs/g2p_c/averaged.keras \\
        --beams 1 4 8 --length-penalties 0 0.6 1.0 --output runs/search_table.json
    # checkpoint averaging vs the last checkpoint: each model alone, no ensemble
    .venv/bin/python examples/g2p_search_table.py --single-models --ensemble-sizes \\
        --model runs/g2p_a/checkpoints/epoch_030.keras --model runs/g2p_a/averaged.keras

Every system is decoded on the CMUdict dev words (never the test split: the
table is for choosing settings) with every beam width of `--beams` (1 is
greedy search, which has no length penalty) and, for beam search, every
length penalty alpha of `--length-penalties`. The systems are

- for each k of `--ensemble-sizes` (default 1, 2, ..., number of models):
  the first k `--model`s decoded as one `kerasseq.models.Ensemble` (k = 1:
  the first model alone), the members' next-token distributions averaged
  in probability space;
- with `--single-models`: every `--model` alone.

It prints a Markdown table (system, beam, alpha, dev WER, dev PER, decoding
seconds) and writes the rows to `--output` (JSON) when given. The decoding
time grows with the beam width and with the number of members; on CPU,
`--dev-words 1000` gives a quicker first look.
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

import kerasseq.models  # noqa: E402,F401  (registers the model classes)
from kerasseq.data import load_cmudict  # noqa: E402
from kerasseq.evaluation import g2p_error_rates  # noqa: E402
from kerasseq.models import Ensemble  # noqa: E402


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", required=True, metavar="PATH",
                        help="a .keras G2P model (repeat for ensembles; order matters)")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4, 8],
                        help="beam widths (1 = greedy search)")
    parser.add_argument("--length-penalties", type=float, nargs="+", default=[0.0, 0.6, 1.0],
                        metavar="ALPHA", help="GNMT length penalties for beam search")
    parser.add_argument("--ensemble-sizes", type=int, nargs="*", default=None, metavar="K",
                        help="ensembles of the first K models (default: 1 .. number of models; "
                             "none with an empty list)")
    parser.add_argument("--single-models", action="store_true",
                        help="also decode every model alone")
    parser.add_argument("--dev-words", type=int, default=None,
                        help="dev words decoded (default: all 6,302)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--output", default=None, help="write the rows as JSON here")
    return parser


def systems(models, names, ensemble_sizes, single_models):
    """`[(label, decodable), ...]`: ensembles of the first k models, then single models."""
    chosen = []
    for size in ensemble_sizes:
        if not 1 <= size <= len(models):
            raise SystemExit(f"--ensemble-sizes: {size} is not in [1, {len(models)}]")
        if size == 1:
            chosen.append((names[0], models[0]))
        else:
            chosen.append((f"ensemble of {size} ({', '.join(names[:size])})",
                           Ensemble(models[:size])))
    if single_models:
        chosen.extend((name, model) for name, model in zip(names, models, strict=True)
                      if not any(model is other for _, other in chosen))
    return chosen


def decode_settings(beams, length_penalties):
    """`[(beam, alpha, search settings), ...]`; greedy once, beam search per alpha."""
    settings = []
    for beam in beams:
        if beam < 1:
            raise SystemExit(f"--beams: {beam} is not a beam width >= 1")
        if beam == 1:
            settings.append((1, None, {"method": "greedy"}))
            continue
        for alpha in length_penalties:
            settings.append((beam, alpha, {"method": "beam", "num_beams": beam,
                                           "length_penalty": alpha}))
    return settings


def label(path):
    """`run/model.keras` for a path: enough to tell the runs apart."""
    return os.path.join(os.path.basename(os.path.dirname(os.path.abspath(path))),
                        os.path.basename(path))


def main(argv=None):
    args = make_parser().parse_args(argv)
    models = [keras.models.load_model(path, compile=False) for path in args.model]
    names = [label(path) for path in args.model]
    sizes = args.ensemble_sizes if args.ensemble_sizes is not None else range(1, len(models) + 1)
    entries = load_cmudict("dev")[: args.dev_words]
    words = [word for word, _ in entries]
    references = [prons for _, prons in entries]
    rows = []
    print(f"dev: {len(words):,} words\n")
    print("| system | beam | length penalty | dev WER | dev PER | seconds |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, model in systems(models, names, sizes, args.single_models):
        for beam, alpha, search in decode_settings(args.beams, args.length_penalties):
            started = time.time()
            hypotheses = model.translate(words, batch_size=args.batch_size, **search)
            seconds = time.time() - started
            rates = g2p_error_rates(hypotheses, references)
            members = len(model.members) if isinstance(model, Ensemble) else 1
            rows.append({"system": name, "members": members, "beam": beam, "length_penalty": alpha,
                         "wer": rates["wer"], "per": rates["per"], "words": rates["words"],
                         "decode_seconds": round(seconds, 1)})
            alpha_text = "-" if alpha is None else f"{alpha:g}"
            print(f"| {name} | {beam} | {alpha_text} | {rates['wer']:.2%} | "
                  f"{rates['per']:.2%} | {seconds:.0f} |", flush=True)
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as handle:
            json.dump({"split": "dev", "models": args.model, "rows": rows}, handle, indent=2)
    return rows


if __name__ == "__main__":
    main()
