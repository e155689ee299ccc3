"""Recipe choices for the Spanish → English Bible Transformer, made on dev with
the step budget of the 90-minute CPU run, on any machine (a GPU in minutes).

The 90-minute run of `spanish_to_english_bible.py` (shared vocabulary of 8,000
pieces, tied embeddings) makes 5,394 optimizer steps on the 2-core CPU. A
recipe that makes each step slower gets fewer steps in the same 90 minutes:
`time` measures each recipe's CPU step time on the same real batches, and
`train` gives each recipe the steps that fit the budget on that CPU, so a
faster machine can compare recipes at their CPU budget. Only the dev verses
are translated and scored; the test split is never read.

Three phases:

    # 1. on the CPU machine (needs the SWORD modules and tensorflow-text):
    #    the training and dev verses as WordPiece pieces, the vocabulary,
    #    and (with --guided) eflomal's links of the training verses
    .venv/bin/python examples/bible_recipe_sweep.py prepare --data sweep_data
    #    each recipe's CPU step time on the same batches
    .venv/bin/python examples/bible_recipe_sweep.py time --data sweep_data --out steps.json
    # 2. anywhere (no tensorflow-text needed: the pieces are read by a
    #    whitespace TextTokenizer with the same ids): train every recipe for
    #    its steps, in parallel processes, then decode dev greedily
    python examples/bible_recipe_sweep.py train --data sweep_data --steps steps.json --out OUT
    # 3. on the CPU machine: detokenize with the real WordPiece tokenizer, score
    .venv/bin/python examples/bible_recipe_sweep.py score --data sweep_data OUT/*.json

The recipes (`RECIPES`) vary one lever each of the recorded run's recipe.

The first attempt (2026-11-28, commit 35fabf6 plus this script; an H200
lent for 15 minutes) gave no dev scores: its nine recipes, all started at
once with XLA for `fit`, each spent its whole 4.8-minute training deadline
before a fourth step (the compiles of nine processes on 16 cores, and a
full pass over the data to count the batches), so each decoded dev after
3 steps. Hence the defaults now: `--parallel 3`, no XLA for `fit` unless
`--jit-compile`, no counting pass. The CPU step times of that attempt
(`time`, interleaved, with the machine's other jobs running): medians of
22 steps 2.38 s (base), 2.69 (dff 1024), 2.86 (4 layers), 5.28 (batch 128),
2.50 (guided), so 5,394 / 4,766 / 4,486 / 2,433 / 5,143 steps (the ratios
of the unrounded medians: the rounded ones above give 4,772 for dff 1024).
"""

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SHARED_VOCABULARY = 8000
# The recorded run's recipe, in the arguments of spanish_to_english_bible.py
# (its defaults and --shared-vocabulary-size 8000): `build` builds the model
# with that example's own `build_model`.
BASE = {"layers": 3, "d_model": 256, "heads": 4, "dff": 512, "transformer_dropout": 0.1,
        "warmup_steps": 1000, "lr_scale": 1.0, "batch_size": 64, "batch_tokens": None,
        "label_smoothing": 0.1,
        "shared_vocabulary_size": SHARED_VOCABULARY, "guided_alignment_weight": 0.0,
        "guided_alignment_layer": None, "guided_alignment_head": 0}
RECIPES = {
    "base": {},
    "lr_scale_2": {"lr_scale": 2.0},
    "dff_1024": {"dff": 1024},
    "layers_4": {"layers": 4},
    "dropout_0": {"transformer_dropout": 0.0},
    "batch_128": {"batch_size": 128},
    # batches by token count (make_dataset's batch_tokens): the base recipe's
    # mean padded pieces per batch ("like_base": `mean_batch_tokens`), spread evenly
    "tokens": {"batch_tokens": "like_base"},
    # guided alignment (issue: a head that aligns as well as eflomal): its
    # loss weight and its layer (None: the penultimate, 1 of 3)
    "guided": {"guided_alignment_weight": 0.1},
    "guided_weight_0.5": {"guided_alignment_weight": 0.5},
    "guided_weight_0.5_layer_2": {"guided_alignment_weight": 0.5, "guided_alignment_layer": 2},
}
# recipes whose steps cost what the base recipe's cost (same shapes, same work)
SAME_COST_AS_BASE = ("lr_scale_2", "dropout_0")
SAME_COST_AS_GUIDED = ("guided_weight_0.5", "guided_weight_0.5_layer_2")
BASE_STEPS = 5394  # the recorded 90-minute run's steps (docs/results.md)
POSITIONS = 256  # the example's position table (its POSITIONS)
MAX_PIECES = 100


def recipe(name):
    return {**BASE, **RECIPES[name]}


def examples_folder():
    """spanish_to_english_bible.py and _translation_common.py import as modules."""
    if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------- prepare (CPU)
def prepare(args):
    examples_folder()
    from spanish_to_english_bible import make_tokenizers

    from kerasseq.data.sword import load_bible_pairs

    pairs = load_bible_pairs("spaRV1909eb", "engWEB2015eb")
    train = [p for p in pairs if p.split == "train"]
    dev = [p for p in pairs if p.split == "dev"]
    source_tokenizer, target_tokenizer = make_tokenizers(train, 0, 0, SHARED_VOCABULARY)
    vocabulary = source_tokenizer.get_vocabulary()
    assert vocabulary == target_tokenizer.get_vocabulary()
    os.makedirs(args.data, exist_ok=True)
    with open(os.path.join(args.data, "vocabulary.txt"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(vocabulary) + "\n")

    def pieces(tokenizer, texts):
        ids = tokenizer.encode(texts).to_list()
        return [" ".join(vocabulary[i] for i in row) for row in ids]

    for split, rows in (("train", train), ("dev", dev)):
        sources = pieces(source_tokenizer, [p.source for p in rows])
        targets = pieces(target_tokenizer, [p.target for p in rows])
        with open(os.path.join(args.data, f"{split}.tsv"), "w", encoding="utf-8") as handle:
            for source, target, pair in zip(sources, targets, rows, strict=True):
                handle.write(f"{source}\t{target}\t{' '.join(pair.target.split())}\n")
    if args.guided:
        from kerasseq.alignment import reference_alignments

        links = reference_alignments([p.source for p in train], [p.target for p in train],
                                     source_tokenizer, target_tokenizer,
                                     cache_path=os.path.join(args.data, "reference_links.npz"))
        with open(os.path.join(args.data, "links.json"), "w", encoding="utf-8") as handle:
            json.dump([row.tolist() for row in links], handle)
    # the whitespace tokenizer of `train` must give the WordPiece ids exactly
    check = whitespace_tokenizer(args.data)
    sample = [p.source for p in dev[:200]]
    assert check.encode(pieces(source_tokenizer, sample)).to_list() == \
        source_tokenizer.encode(sample).to_list()
    print(f"{len(train)} training and {len(dev)} dev verses, {len(vocabulary)} ids in {args.data}")


def read_split(data, split):
    with open(os.path.join(data, f"{split}.tsv"), encoding="utf-8") as handle:
        return [line.rstrip("\n").split("\t") for line in handle]


def whitespace_tokenizer(data):
    from kerasseq.data import TextTokenizer

    with open(os.path.join(data, "vocabulary.txt"), encoding="utf-8") as handle:
        vocabulary = handle.read().splitlines()
    return TextTokenizer(vocabulary[4:], split="whitespace")


# ---------------------------------------------------------------- the model
def build(settings, tokenizers):
    """The recipe's Transformer, compiled, by the example's own `build_model`
    (`tokenizers`: the real WordPiece ones, or twice the whitespace tokenizer
    of the pieces, which has the same ids)."""
    examples_folder()
    from _translation_common import build_model

    name = "transformer_guided" if settings["guided_alignment_weight"] else "transformer"
    return build_model(name, argparse.Namespace(**settings), tokenizers, POSITIONS, None,
                       norm_first=True)


def dataset(data, settings, seed=0):
    from kerasseq.data import make_dataset

    tokenizer = whitespace_tokenizer(data)
    rows = read_split(data, "train")
    alignments = None
    if settings["guided_alignment_weight"]:
        import numpy as np

        with open(os.path.join(data, "links.json"), encoding="utf-8") as handle:
            alignments = [np.asarray(row, dtype="int32").reshape(-1, 2)
                          for row in json.load(handle)]
    pairs = [(s, t) for s, t, _ in rows]
    batching = {"batch_size": settings["batch_size"]}
    if settings["batch_tokens"] == "like_base":
        batching = {"batch_size": None,
                    "batch_tokens": mean_batch_tokens(make_dataset(
                        pairs, tokenizer, tokenizer, batch_size=settings["batch_size"],
                        shuffle=False, bucket_boundaries="auto", max_source_length=MAX_PIECES,
                        max_target_length=MAX_PIECES))}
    elif settings["batch_tokens"]:
        batching = {"batch_size": None, "batch_tokens": settings["batch_tokens"]}
    return make_dataset(pairs, tokenizer, tokenizer, seed=seed, bucket_boundaries="auto",
                        max_source_length=MAX_PIECES, max_target_length=MAX_PIECES,
                        alignments=alignments, **batching)


def mean_batch_tokens(batches):
    """The mean padded pieces of a batch (rows x length of its target) over one
    pass of `batches`: the budget of the `tokens` recipe, so that its batches
    hold what the base recipe's hold on average."""
    sizes = [int(target_out.shape[0]) * int(target_out.shape[1]) for _, target_out in batches]
    return int(round(sum(sizes) / len(sizes)))


# ---------------------------------------------------------------- time (CPU)
def step_budgets(timed):
    """`{recipe: {"cpu_step_seconds": s, ...}}` of the timed recipes -> the same
    with every recipe's `steps` (and the untimed recipes that cost what the base
    or the guided recipe costs): BASE_STEPS * base seconds / recipe seconds,
    never more than BASE_STEPS."""
    steps = {name: dict(values) for name, values in timed.items()}
    for names, like in ((SAME_COST_AS_BASE, "base"), (SAME_COST_AS_GUIDED, "guided")):
        for name in names:
            if like in steps and name not in steps:
                steps[name] = {"cpu_step_seconds": steps[like]["cpu_step_seconds"],
                               "timed_as": like}
    base = steps["base"]["cpu_step_seconds"]
    for values in steps.values():
        values["steps"] = min(BASE_STEPS, int(round(BASE_STEPS * base
                                                    / values["cpu_step_seconds"])))
    return steps


def shape_of(batch):
    inputs, _ = batch
    values = inputs.values() if isinstance(inputs, dict) else inputs
    return tuple(tuple(value.shape) for value in values)


def time_recipes(args):
    """Each recipe's CPU step time, interleaved: every round runs one step of
    each recipe (its own real batches, the same for every round count), so a
    machine whose load drifts slows every recipe alike. The median decides
    the step budget: on a machine with other jobs, the means carry their load
    spikes (measured 2026-11-28: the guided recipe, which does strictly more
    work, came out faster than the base by its mean). No recipe gets more
    steps than the base run (`step_budgets`)."""
    import statistics

    import keras

    names = args.recipes or [name for name in RECIPES
                             if name not in SAME_COST_AS_BASE + SAME_COST_AS_GUIDED]
    tokenizer = whitespace_tokenizer(args.data)
    models, batches, times = {}, {}, {name: [] for name in names}
    for name in names:
        settings = recipe(name)
        keras.utils.set_random_seed(0)
        models[name] = build(settings, (tokenizer, tokenizer))
        batches[name] = list(dataset(args.data, settings).take(args.warmup + args.batches))
        for batch in batches[name][: args.warmup]:
            models[name].train_on_batch(*batch)
    shapes = {name: {shape_of(batch) for batch in batches[name][: args.warmup]}
              for name in names}
    for index in range(args.warmup, args.warmup + args.batches):
        for name in names:
            batch = batches[name][index]
            started = time.perf_counter()
            models[name].train_on_batch(*batch)
            if shape_of(batch) in shapes[name]:  # a new shape's step also traces: not kept
                times[name].append(time.perf_counter() - started)
            shapes[name].add(shape_of(batch))
    steps = {}
    for name in names:
        seconds = statistics.median(times[name])
        steps[name] = {"cpu_step_seconds": round(seconds, 4),
                       "cpu_step_seconds_mean": round(statistics.fmean(times[name]), 4)}
        print(f"{name}: {seconds:.3f} s/step on the CPU (median of {len(times[name])} steps; "
              f"mean {statistics.fmean(times[name]):.3f})", flush=True)
    steps = step_budgets(steps)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump({"base_steps": BASE_STEPS, "timed_batches": args.batches,
                   "recipes": steps}, handle, indent=2)
    print(json.dumps(steps, indent=2))


# ---------------------------------------------------------------- train (anywhere)
def train_one(args):
    import keras
    import tensorflow as tf

    if args.threads:  # 0: TensorFlow's choice
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    examples_folder()
    from spanish_to_english_bible import StopAfterSteps

    from kerasseq.training import TimeLimit

    settings = recipe(args.recipe)
    tokenizer = whitespace_tokenizer(args.data)
    keras.utils.set_random_seed(0)
    model = build(settings, (tokenizer, tokenizer))
    data = dataset(args.data, settings)
    model.jit_compile = args.jit_compile
    started = time.monotonic()
    history = model.fit(data, epochs=10 ** 4, verbose=0,
                        callbacks=[StopAfterSteps(args.steps), TimeLimit(args.minutes * 60)])
    train_seconds = time.monotonic() - started
    steps = int(model.optimizer.iterations.numpy())
    dev = read_split(args.data, "dev")[: args.dev_examples or None]
    started = time.monotonic()
    ids = tokenizer.encode([s for s, _, _ in dev])[:, :POSITIONS].to_tensor()
    tokens, _, lengths = model.generate(ids, method="greedy", max_length=200, max_length_a=2.0,
                                        max_length_b=10, max_source_length=POSITIONS,
                                        batch_size=64, jit_compile=args.jit_decode)
    hypotheses = [row[:length].tolist() for row, length in zip(tokens[:, 0], lengths[:, 0],
                                                                      strict=True)]
    record = {"recipe": args.recipe, "settings": settings, "steps": steps,
              "target_steps": args.steps, "train_seconds": round(train_seconds, 1),
              "decode_seconds": round(time.monotonic() - started, 1),
              "jit_compile": args.jit_compile,
              "loss": [float(v) for v in history.history["loss"]],
              "dev_greedy_ids": hypotheses}
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    if args.weights:  # float16 (half the size), for scoring the alignments elsewhere
        import numpy as np

        np.savez_compressed(args.weights, *[w.astype("float16") for w in model.get_weights()])
    print(f"{args.recipe}: {steps} steps in {train_seconds:.0f} s", flush=True)


def train_all(args):
    """Every recipe in its own process, `--parallel` at a time."""
    with open(args.steps, encoding="utf-8") as handle:
        budget = json.load(handle)["recipes"]
    os.makedirs(args.out, exist_ok=True)
    waiting = list(args.recipes or budget)
    running = []
    while waiting or running:
        while waiting and len(running) < args.parallel:
            name = waiting.pop(0)
            weights = []
            if args.weights_dir and recipe(name)["guided_alignment_weight"]:
                weights = ["--weights", os.path.join(args.weights_dir, f"{name}.npz")]
            command = [sys.executable, __file__, "train-one", "--data", args.data, "--recipe",
                       name, *weights, "--steps", str(budget[name]["steps"]), "--minutes",
                       str(args.minutes), "--threads", str(args.threads),
                       "--out", os.path.join(args.out, f"{name}.json"),
                       *(["--jit-compile"] if args.jit_compile else [])]
            log = open(os.path.join(args.logs or args.out, f"{name}.log"), "w")
            running.append((name, log, subprocess.Popen(command, stdout=log,
                                                        stderr=subprocess.STDOUT)))
        time.sleep(1)
        for name, log, process in list(running):
            if process.poll() is not None:
                log.close()
                print(f"{name}: exit {process.returncode}", flush=True)
                running.remove((name, log, process))


# ---------------------------------------------------------------- score (CPU)
def score(args):
    import tensorflow as tf

    from kerasseq.data import WordPieceTextTokenizer
    from kerasseq.evaluation import corpus_bleu

    with open(os.path.join(args.data, "vocabulary.txt"), encoding="utf-8") as handle:
        vocabulary = handle.read().splitlines()
    tokenizer = WordPieceTextTokenizer(vocabulary[4:], lowercase=False)
    references = [reference for _, _, reference in read_split(args.data, "dev")]
    rows = []
    for path in args.files:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
        texts = tokenizer.decode_to_strings(tf.ragged.constant(record["dev_greedy_ids"],
                                                               dtype="int32"))
        rows.append((record["recipe"], record["steps"], record["target_steps"],
                     record["train_seconds"], corpus_bleu(texts, references[: len(texts)]),
                     record["loss"][-1] if record["loss"] else float("nan")))
    print("| recipe | steps (CPU budget) | seconds | last epoch's loss | dev BLEU (greedy) |")
    print("|---|---|---|---|---|")
    for name, steps, target, seconds, bleu, loss in sorted(rows, key=lambda r: -r[4]):
        print(f"| {name} | {steps} ({target}) | {seconds:.0f} | {loss:.3f} | {bleu:.2f} |")


# ---------------------------------------------------------------- to-keras (CPU)
def to_keras(args):
    """A guided recipe's weights (`train --weights-dir`) as a `.keras` model with
    the real WordPiece tokenizers, for `examples/bible_alignments.py --split dev`."""
    import numpy as np

    from kerasseq.data import WordPieceTextTokenizer

    with open(os.path.join(args.data, "vocabulary.txt"), encoding="utf-8") as handle:
        pieces = handle.read().splitlines()[4:]
    tokenizers = (WordPieceTextTokenizer(pieces, lowercase=True, name="source_tokenizer"),
                  WordPieceTextTokenizer(pieces, lowercase=False, name="target_tokenizer"))
    settings = recipe(args.recipe)
    model = build(settings, tokenizers)
    with np.load(args.weights) as arrays:
        model.set_weights([arrays[f"arr_{i}"].astype("float32") for i in range(len(arrays))])
    model.optimizer.build(model.trainable_variables)  # else load_model warns of its variables
    model.save(args.out)
    print(f"{args.recipe}: {args.out}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("prepare")
    p.add_argument("--data", required=True)
    p.add_argument("--guided", action="store_true")
    p = commands.add_parser("time")
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--recipes", nargs="*")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batches", type=int, default=30)
    p = commands.add_parser("train")
    p.add_argument("--data", required=True)
    p.add_argument("--steps", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--logs")
    p.add_argument("--weights-dir", help="the guided recipes' weights (float16 .npz) go here")
    p.add_argument("--parallel", type=int, default=3, help="recipes trained at a time")
    p.add_argument("--jit-compile", action="store_true",
                   help="XLA for fit (one compile per bucket shape and process)")
    p.add_argument("--recipes", nargs="*")
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--threads", type=int, default=2)
    p = commands.add_parser("train-one")
    p.add_argument("--data", required=True)
    p.add_argument("--recipe", required=True, choices=list(RECIPES))
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--minutes", type=float, default=5.0,
                   help="minutes of fit at most (kerasseq.training.TimeLimit)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--jit-decode", action="store_true")
    p.add_argument("--dev-examples", type=int, default=0, help="0: all (a smoke test: a few)")
    p.add_argument("--weights", help="also save the weights (float16 .npz) here")
    p.add_argument("--jit-compile", action="store_true")
    p.add_argument("--out", required=True)
    p = commands.add_parser("to-keras")
    p.add_argument("--data", required=True)
    p.add_argument("--recipe", required=True, choices=list(RECIPES))
    p.add_argument("--weights", required=True)
    p.add_argument("--out", required=True)
    p = commands.add_parser("score")
    p.add_argument("--data", required=True)
    p.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    {"prepare": prepare, "time": time_recipes, "train": train_all, "train-one": train_one,
     "score": score, "to-keras": to_keras}[args.command](args)


if __name__ == "__main__":
    main()
