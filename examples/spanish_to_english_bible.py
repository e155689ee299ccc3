"""Spanish → English on the SWORD Bibles: a Transformer and an RNN with Bahdanau attention.

    sudo apt-get install --no-install-recommends libsword-utils sword-text-sparv sword-text-web
    # or: make examples-data
    .venv/bin/python examples/spanish_to_english_bible.py --output-dir runs/bible
    .venv/bin/python examples/spanish_to_english_bible.py --smoke --output-dir /tmp/bible

Data: the Reina-Valera 1909 (SWORD module `spaRV1909eb`) and the World
English Bible (`engWEB2015eb`), paired verse by verse by
`kerasseq.data.load_bible_pairs` (about 31,000 verses; markup and footnotes
removed; split by chapter: dev and test about 5 % each; training verses that
repeat a dev/test verse removed). When the modules are not installed the
script says so and exits with status 0.

Subwords: one `kerasseq.data.WordPieceTextTokenizer` per language learned on
the training verses; the Spanish one lower-cases (the 1909 edition writes the
first word of a chapter in capitals, "EN el principio"), the English one keeps
case, so the output is cased and scored with cased sacreBLEU (its default
13a tokenizer).

Phases, so a long training can be scored later with newer code:

- `--phase train` (per model in `--models`): `model.fit` with teacher
  forcing, a time limit (`--time-limit-minutes`), greedy BLEU on the dev
  verses after every epoch (all 1,482 by default, `--dev-examples`; the
  first few hundred are easier than the test split, so choices made on them
  do not transfer), the best epoch's weights kept, early stopping after
  `--patience` epochs, the last `--keep-checkpoints` epochs kept for
  averaging. Writes OUTPUT_DIR/NAME/model.keras, checkpoints/epoch_XXX.keras,
  history.csv (a row per finished epoch) and history.json (with the minutes
  of `fit` at each epoch's end). `--resume` goes on with a stopped training
  from its newest checkpoint (see `train`).
- `--phase dev`: the evaluate phase's dev choices only (below), written to
  OUTPUT_DIR/NAME/dev_choices.json; the test split is not translated, so a
  run can be judged on dev before its test split is scored.
- `--phase evaluate`: on the same dev verses (or the choices of `--phase dev`
  when they were made with the same settings), the averaged last checkpoints
  against the best epoch (the better one is kept), then the beam length
  penalty (`--length-penalties`), then `SearchConfig.no_repeat_ngram_size`
  (`--no-repeat-ngram-sizes`, beam search with that penalty); then the test
  split is translated once, greedy and beam, and scored: BLEU and chrF, BLEU
  by source length, decode times, repeats and loops
  (`kerasseq.evaluation.count_repetitions`), and, when dev chose a guard,
  the same with it (NAME/test_guarded.tsv). Writes OUTPUT_DIR/results.json (models evaluated by an earlier run
  into the same directory stay in it), NAME/test_translations.tsv (every
  test verse: reference, greedy, beam, the beam's sentence chrF),
  OUTPUT_DIR/translations.md (the best, median and worst verses by the first
  model's chrF, with every model's output) and OUTPUT_DIR/learning_curves.png
  (dev BLEU and loss against minutes of `fit`; with `--figures-dir`, also
  there as bible_learning_curves.png, the docs' name, for a separate copy
  into docs/images).

Every phase writes only under OUTPUT_DIR and `--figures-dir` (and
`load_bible_pairs` keeps its parse of the Bibles in ~/.cache/kerasseq).

`--models transformer_guided` trains the Transformer with guided alignment:
eflomal aligns the training verses (never dev or test; cached as
OUTPUT_DIR/reference_links.npz), and cross-attention head
`--guided-alignment-head` of layer `--guided-alignment-layer` is trained
toward those links with weight `--guided-alignment-weight`
(`kerasseq.training.guided_alignment_loss`); its alignments then come from
that head (examples/bible_alignments.py scores them).

`--shared-vocabulary-size N` learns one WordPiece vocabulary of at most N
ids for both languages, and the Transformers share one embedding matrix for
the encoder, the decoder and the output projection.

`--phase all` (the default) runs train and evaluate. The recorded run is the defaults with
`--time-limit-minutes 90`, one model at a time on an otherwise idle machine;
its figures are in docs/results.md ("Spanish → English (SWORD Bibles)") and
docs/tutorial_bible.md. A time limit gives a faster machine more training;
`--max-steps N` stops after N optimizer steps instead (each run's
history.json records its `steps`), the same amount of training on any
machine. docs/tutorial_bible.md ("Reproduce the full run") gives the
commands in order, the recorded run's steps and its time on this machine.
"""

import argparse
import hashlib
import json
import os
import shutil
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from _translation_common import build_model, model_names, print_report, set_threads  # noqa: E402

from kerasseq._files import save_model_atomically, write_text_atomically  # noqa: E402
from kerasseq.alignment import reference_alignments  # noqa: E402
from kerasseq.data import WordPieceTextTokenizer, make_dataset  # noqa: E402
from kerasseq.data.sword import SwordError, load_bible_pairs  # noqa: E402
from kerasseq.evaluation import (  # noqa: E402
    corpus_bleu,
    corpus_chrf,
    count_repetitions,
    scores_by_length,
)
from kerasseq.training import (  # noqa: E402
    DevBleuEarlyStopping,
    KeepLastCheckpoints,
    TimeLimit,
    average_checkpoints,
    epoch_checkpoints,
)
from kerasseq.training.averaging import CHECKPOINT_NAME, CHECKPOINT_PATTERN  # noqa: E402
from kerasseq.training.checkpoints import (  # noqa: E402
    HistoryCSVLogger,
    read_history,
    truncate_history,
)

MODELS = ("transformer", "rnn_attention", "transformer_guided")
DEFAULT_MODELS = "transformer,rnn_attention"
LENGTH_BUCKETS = (0, 10, 20, 30, 40, 60)  # source words
POSITIONS = 256  # the Transformer's position table; test sources are cut to it


def make_tokenizers(train_pairs, source_size, target_size, shared_size=0):
    """WordPiece tokenizers learned on the training verses: Spanish lower-cased, English cased.

    With `shared_size` > 0 both use one vocabulary of at most that many ids,
    learned on the lower-cased Spanish and the cased English verses together
    (a joint subword vocabulary, as Marian and fairseq recipes use with tied
    embeddings: names spelt alike in the two Bibles get the same pieces).
    """
    if shared_size:
        pieces = WordPieceTextTokenizer.from_texts(
            [pair.source.lower() for pair in train_pairs] + [pair.target for pair in train_pairs],
            max_tokens=shared_size, lowercase=False).vocabulary
        return (WordPieceTextTokenizer(pieces, lowercase=True, name="source_tokenizer"),
                WordPieceTextTokenizer(pieces, lowercase=False, name="target_tokenizer"))
    source = WordPieceTextTokenizer.from_texts(
        [pair.source for pair in train_pairs], max_tokens=source_size, lowercase=True,
        name="source_tokenizer")
    target = WordPieceTextTokenizer.from_texts(
        [pair.target for pair in train_pairs], max_tokens=target_size, lowercase=False,
        name="target_tokenizer")
    return source, target


def search_settings(args):
    # at most 2 S + 10 pieces for sources padded to S pieces (and never more
    # than --max-output-pieces): a runaway hypothesis stops early
    settings = {"max_length": args.max_output_pieces, "max_source_length": POSITIONS,
                "max_length_a": 2.0, "max_length_b": 10}
    if args.smoke:
        settings["jit_compile"] = False
    return settings


class StopAfterSteps(keras.callbacks.Callback):
    """Stops `fit` after `steps` optimizer steps in all: `--max-steps`, the way
    to repeat a recorded run's amount of training on a machine of another speed."""

    def __init__(self, steps):
        super().__init__()
        self.steps = steps

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= self.steps:
            self.model.stop_training = True


def library_versions():
    """The versions that decide a run's numbers, for results.json."""
    import platform
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for package in ("tensorflow", "keras", "keras-hub", "numpy", "sacrebleu", "eflomal"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def machine():
    import platform

    model = platform.processor()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle
                          if line.startswith("model name")), model)
    return {"cpu": model, "cores": os.cpu_count()}


def matmul_gflops(size=2048, products=5):
    """This machine's float32 matrix-product rate now, in GFLOP/s: the best of
    three timings of `products` products of two `size` × `size` matrices.

    A wall-clock budget (`--time-limit-minutes`) buys as many steps as the
    machine's speed allows, and a shared machine's speed changes from day to
    day (docs/results.md, "Budgets in minutes"). Each run records the rate
    before and after `fit` (history.json, `machine`), so that two runs'
    budgets can be compared; `--max-steps` repeats a run's training whatever
    the speed."""
    import tensorflow as tf

    a = tf.random.normal([size, size], seed=1)
    b = tf.random.normal([size, size], seed=2)
    product = tf.function(tf.linalg.matmul)
    product(a, b).numpy()  # traced and warmed up, not timed
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(products):
            result = product(a, b)
        result.numpy()
        best = min(best, time.perf_counter() - started)
    return round(2 * size ** 3 * products / best / 1e9, 1)


class FitClock(keras.callbacks.Callback):
    """Puts the minutes since `fit` began into each epoch's logs (`fit_minutes`):
    the x axis of the learning curves (dev BLEU against minutes of training).
    First in the callback list, so it reads the clock before the dev scoring
    of that epoch runs: an epoch's minutes are those of its training steps and
    of the earlier epochs' dev scoring. Also logs the epoch's batches
    (`batches`; fewer in an epoch cut by a time or step limit). A resumed run
    counts on from `offset_minutes`, the interrupted run's last `fit_minutes`
    (the time between the two runs is not counted)."""

    def __init__(self, offset_minutes=0.0):
        super().__init__()
        self.offset_minutes = float(offset_minutes)

    def on_train_begin(self, logs=None):
        self._started = time.monotonic() - 60 * self.offset_minutes

    def on_epoch_begin(self, epoch, logs=None):
        self._batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self._batches = batch + 1

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["fit_minutes"] = round((time.monotonic() - self._started) / 60, 3)
            logs["batches"] = self._batches


# The arguments that make a training what it is: a resume with other values
# would go on with another recipe (or other data) than the checkpoints'.
TRAINING_ARGUMENTS = (
    "source_module", "target_module", "source_vocabulary_size", "target_vocabulary_size",
    "shared_vocabulary_size", "max_pieces", "batch_size", "batch_tokens", "label_smoothing",
    "layers", "d_model", "heads", "dff", "transformer_dropout", "warmup_steps", "lr_scale",
    "embedding_dim", "units", "dropout", "learning_rate", "guided_alignment_weight",
    "guided_alignment_layer", "guided_alignment_head", "seed", "patience", "dev_examples",
    "smoke")


def training_arguments(args):
    return {key: getattr(args, key) for key in TRAINING_ARGUMENTS}


def resume_point(directory, args):
    """What `--resume` goes on from in `directory`: None on a fresh start, else
    (the newest epoch checkpoint, its epoch number, the history of the epochs
    up to it, the best epoch, the path of its checkpoint). Refuses, with the
    reason, what it cannot resume exactly: checkpoints without `--resume`, a
    history with fewer rows than the checkpoint's epochs, a best epoch whose
    checkpoint was not kept."""
    checkpoints = epoch_checkpoints(os.path.join(directory, "checkpoints"))
    if not checkpoints:
        return None
    if not args.resume:
        raise SystemExit(f"{directory}/checkpoints already holds epoch checkpoints of an earlier "
                         "run (they would join the average): pass --resume to go on from the "
                         "newest one, or choose another --output-dir")
    arguments_path = os.path.join(directory, "train_arguments.json")
    if os.path.exists(arguments_path):  # runs begun before --resume existed have none
        with open(arguments_path, encoding="utf-8") as handle:
            recorded = json.load(handle)
        changed = {key: (recorded.get(key), value)
                   for key, value in training_arguments(args).items()
                   if recorded.get(key) != value}
        if changed:
            raise SystemExit("--resume: the run in " + directory + " was trained with other "
                             "arguments: " + ", ".join(
                                 f"--{key.replace('_', '-')} {old!r} (now {new!r})"
                                 for key, (old, new) in changed.items()))
    newest = checkpoints[-1]
    epochs = int(CHECKPOINT_PATTERN.fullmatch(os.path.basename(newest)).group(1))
    history_path = os.path.join(directory, "history.csv")
    truncate_history(history_path, epochs)  # rows of an epoch whose checkpoint never came
    history = {key: values for key, values in read_history(history_path).items()
               if key != "epoch"}
    found = len(history.get("dev_bleu", []))
    if found != epochs:
        raise SystemExit(f"--resume: {history_path} has dev BLEU rows for {found} epochs, but the "
                         f"newest checkpoint ({os.path.basename(newest)}) is of epoch {epochs}: "
                         "the early stopping and the learning curves of the earlier epochs "
                         "cannot be rebuilt")
    best = DevBleuEarlyStopping.best_epoch_of(history["dev_bleu"])
    best_path = os.path.join(directory, "checkpoints", CHECKPOINT_NAME.format(epoch=best))
    if not os.path.exists(best_path):
        raise SystemExit(f"--resume: the best epoch ({best}) has no checkpoint left in "
                         f"{directory}/checkpoints (--keep-checkpoints must exceed --patience)")
    return newest, epochs, history, best, best_path


def train(name, args, data, tokenizers, dev_pairs):
    """Train one model; write NAME/model.keras, NAME/checkpoints/, NAME/history.csv
    (a row per finished epoch) and NAME/history.json.

    With `--resume`, a model whose directory holds epoch checkpoints goes on
    from the newest one: its weights and optimizer state (the step count,
    hence the learning rate, and Adam's moments), the epoch count, the
    history, the dev BLEU early stopping, the `fit` minutes of the time limit
    (as `fit_minutes` counts them: without the last epoch's dev scoring) and
    the step count of `--max-steps`. Not restored: the order of the batches,
    which starts again from `--seed`, and the dropout masks, drawn from
    `--seed` plus the epochs done; a resumed run is equivalent to an
    uninterrupted one, not identical to it. A resume with other training
    arguments than NAME/train_arguments.json records is refused."""
    keras.utils.set_random_seed(args.seed)
    directory = os.path.join(args.output_dir, name)
    os.makedirs(directory, exist_ok=True)
    resumed = resume_point(directory, args)
    model = build_model(name, args, tokenizers, POSITIONS, args.max_output_pieces, norm_first=True)
    dev_bleu = DevBleuEarlyStopping([pair.source for pair in dev_pairs],
                                    [pair.target for pair in dev_pairs],
                                    patience=args.patience, **search_settings(args))
    initial_epoch, minutes_done, stopped_early, best_weights = 0, 0.0, False, None
    if resumed is not None:
        newest, initial_epoch, earlier, best, best_path = resumed
        model.optimizer.build(model.trainable_variables)  # its state loads with the weights
        model.load_weights(best_path)
        best_weights = model.get_weights()
        stopped_early = initial_epoch - best >= args.patience  # the interrupted run had ended
        if not stopped_early:
            dev_bleu.resume(earlier["dev_bleu"], best_weights=best_weights)
        model.load_weights(newest)
        if int(model.optimizer.iterations.numpy()) == 0:
            raise SystemExit(f"--resume: {newest} holds no optimizer state (step 0): the "
                             "learning rate and Adam's moments would start over")
        keras.utils.set_random_seed(args.seed + initial_epoch)  # not epoch 1's dropout again
        minutes_done = earlier["fit_minutes"][-1]
        print(f"--- {name}: resumed after epoch {initial_epoch} ({os.path.basename(newest)}, "
              f"step {int(model.optimizer.iterations.numpy())}, {minutes_done:.1f} minutes "
              "of fit)", flush=True)
    history_path = os.path.join(directory, "history.csv")
    segments_path = os.path.join(directory, "segments.json")
    if resumed is None:  # files of a run whose checkpoints are gone: not this run's
        for stale in (history_path, segments_path, os.path.join(directory, DEV_CHOICES),
                      os.path.join(directory, "averaged.keras")):
            if os.path.exists(stale):
                os.remove(stale)
        write_json(os.path.join(directory, "train_arguments.json"), training_arguments(args))
    # History rows before checkpoints: a kill between the two leaves a row
    # that the resume drops (truncate_history), never a checkpoint without one.
    callbacks = [FitClock(minutes_done), dev_bleu, HistoryCSVLogger(history_path),
                 KeepLastCheckpoints(os.path.join(directory, "checkpoints"),
                                     keep=args.keep_checkpoints)]
    time_limit = None
    left = None
    if args.time_limit_minutes:
        left = args.time_limit_minutes - minutes_done
        time_limit = TimeLimit(max(left, 1e-9) * 60)
        callbacks.append(time_limit)
    if args.max_steps:
        callbacks.append(StopAfterSteps(args.max_steps))
    steps_done = int(model.optimizer.iterations.numpy())
    finished = bool((left is not None and left <= 0) or stopped_early
                    or (args.max_steps and steps_done >= args.max_steps)
                    or initial_epoch >= args.epochs)
    print(f"--- {name}: {model.count_params():,} parameters", flush=True)
    matmul_size = 256 if args.smoke else 2048
    speed_before = matmul_gflops(matmul_size)
    print(f"float32 matmul rate before fit: {speed_before} GFLOP/s", flush=True)
    segments = []  # one entry per fit of the run, written before it starts: a killed one stays
    if os.path.exists(segments_path):
        with open(segments_path, encoding="utf-8") as handle:
            segments = json.load(handle)
    segment = {"initial_epoch": initial_epoch, "initial_step": steps_done,
               "train_seconds": None, "matmul_size": matmul_size,
               "matmul_gflops_before_fit": speed_before, "matmul_gflops_after_fit": None}
    segments.append(segment)
    write_json(segments_path, segments)
    started = time.time()
    if finished:
        print(f"--- {name}: nothing left to train (step {steps_done}, epoch {initial_epoch})",
              flush=True)
        if best_weights is not None:
            model.set_weights(best_weights)  # what fit would have put back
    else:
        model.fit(data[0], validation_data=data[1], epochs=args.epochs,
                  initial_epoch=initial_epoch, steps_per_epoch=3 if args.smoke else None,
                  callbacks=callbacks, verbose=args.verbose)
    train_seconds = round(time.time() - started, 1)
    speed_after = matmul_gflops(matmul_size)
    print(f"float32 matmul rate after fit: {speed_after} GFLOP/s", flush=True)
    history = {key: values for key, values in read_history(history_path).items()
               if key != "epoch"}
    scores = history.get("dev_bleu", [])
    segment.update(train_seconds=train_seconds, matmul_gflops_after_fit=speed_after)
    record = {
        "parameters": int(model.count_params()),
        # a killed fit's seconds are not known: the sum of the fits that ended
        "train_seconds": round(sum(part["train_seconds"] or 0 for part in segments), 1),
        "best_epoch": DevBleuEarlyStopping.best_epoch_of(scores),
        "steps": int(model.optimizer.iterations.numpy()),
        "batches_per_epoch": int(history["batches"][0]) if history.get("batches") else None,
        "time_limit_minutes": args.time_limit_minutes,
        "stopped_by_time_limit": bool((time_limit and time_limit.stopped_at_epoch is not None)
                                      or (left is not None and left <= 0)),
        "max_steps": args.max_steps,
        "seed": args.seed,
        "vocabulary_sizes": [tokenizers[0].vocabulary_size, tokenizers[1].vocabulary_size],
        "libraries": library_versions(),
        "machine": {**machine(), "matmul_size": matmul_size,
                    "matmul_gflops_before_fit": speed_before,
                    "matmul_gflops_after_fit": speed_after},
        "history": history,
    }
    if len(segments) > 1:  # one entry per fit of the run (the last one's above too)
        record["resumed_after_epochs"] = [part["initial_epoch"] for part in segments
                                          if part["initial_epoch"] > 0]
        record["segments"] = segments
    model_path = os.path.join(directory, "model.keras")
    save_model_atomically(model, model_path)  # never half-written
    write_json(segments_path, segments)
    write_json(os.path.join(directory, "history.json"), record)
    return record


def write_json(path, data):
    """Write `data` as JSON through a temporary name: never a half-written file."""
    write_text_atomically(path, json.dumps(data, indent=2, ensure_ascii=False))


def sentence_chrf(hypothesis, reference):
    import sacrebleu

    return sacrebleu.sentence_chrf(hypothesis, [reference]).score


DEV_CHOICES = "dev_choices.json"
DEV_FIELDS = ("dev_bleu_greedy_best_epoch", "averaged", "averaged_epochs",
              "dev_bleu_greedy_averaged", "dev_bleu_beam_by_length_penalty", "length_penalty",
              "dev_beam_by_no_repeat_ngram_size", "no_repeat_ngram_size")


def dev_settings(args, dev_pairs, record, directory):
    """What the dev choices depend on: the search, the candidates (in the order
    given: a tie goes to the first), the dev verses and their texts, and the
    training they were made on (its arguments, steps, every epoch's dev BLEU,
    the checkpoints kept). A `dev_choices.json` made with other settings is
    not reused."""
    checkpoints = epoch_checkpoints(os.path.join(directory, "checkpoints"))
    texts = hashlib.sha256("\n".join(f"{pair.verse_id}\t{pair.source}\t{pair.target}"
                                      for pair in dev_pairs).encode("utf-8")).hexdigest()
    arguments_path = os.path.join(directory, "train_arguments.json")
    arguments = None
    if os.path.exists(arguments_path):
        with open(arguments_path, encoding="utf-8") as handle:
            arguments = json.load(handle)
    return {"search": search_settings(args), "num_beams": args.num_beams,
            "length_penalties": list(args.length_penalties),
            "no_repeat_ngram_sizes": sorted(set(args.no_repeat_ngram_sizes)),
            "dev_texts_sha256": texts, "train_arguments": arguments,
            "steps": record.get("steps"),
            "dev_bleu_by_epoch": record["history"].get("dev_bleu", []),
            "checkpoints": [os.path.basename(path) for path in checkpoints]}


def evaluate(name, args, dev_pairs, test_pairs):
    """Average-or-not, the length penalty and the n-gram guard on dev, then the test
    split scored once (`test_pairs` None: dev only, `--phase dev`).

    The dev choices are written to NAME/dev_choices.json; a later evaluate
    with the same settings reuses them instead of decoding dev again, so a
    run can be judged on dev first and its test split scored only if chosen."""
    directory = os.path.join(args.output_dir, name)
    with open(os.path.join(directory, "history.json"), encoding="utf-8") as handle:
        record = json.load(handle)
    settings = dev_settings(args, dev_pairs, record, directory)
    choices_path = os.path.join(directory, DEV_CHOICES)
    earlier = None
    if os.path.exists(choices_path):
        with open(choices_path, encoding="utf-8") as handle:
            earlier = json.load(handle)
    if earlier is not None and earlier["settings"] == settings:
        print(f"{name}: the dev choices of {choices_path} (same settings), dev not decoded "
              "again", flush=True)
        record.update(earlier["choices"])
        if record["averaged"]:  # the same checkpoints (in the settings): the same average
            model = average_checkpoints(epoch_checkpoints(os.path.join(directory, "checkpoints")))
        else:
            model = keras.models.load_model(os.path.join(directory, "model.keras"))
    else:
        model = dev_choices(record, args, dev_pairs, directory)
        write_json(choices_path, {"settings": settings, "choices": {
            key: record[key] for key in DEV_FIELDS if key in record}})
    if test_pairs is None:
        return record
    return test_scores(record, model, args, test_pairs, directory)


def dev_choices(record, args, dev_pairs, directory):
    """The dev half of `evaluate`: fills `record`'s DEV_FIELDS, returns the model
    chosen (the averaged checkpoints or the best epoch)."""
    search = search_settings(args)
    dev_sources = [pair.source for pair in dev_pairs]
    dev_references = [pair.target for pair in dev_pairs]

    def dev_score(model, **settings):
        return corpus_bleu(model.translate(dev_sources, batch_size=64, **search, **settings),
                           dev_references)

    best = keras.models.load_model(os.path.join(directory, "model.keras"))
    record["dev_bleu_greedy_best_epoch"] = dev_score(best, method="greedy")
    model, record["averaged"] = best, False
    checkpoints = epoch_checkpoints(os.path.join(directory, "checkpoints"))
    if len(checkpoints) > 1:
        averaged = average_checkpoints(checkpoints)
        record["averaged_epochs"] = [os.path.basename(path) for path in checkpoints]
        record["dev_bleu_greedy_averaged"] = dev_score(averaged, method="greedy")
        if record["dev_bleu_greedy_averaged"] > record["dev_bleu_greedy_best_epoch"]:
            model, record["averaged"] = averaged, True
            save_model_atomically(averaged, os.path.join(directory, "averaged.keras"))

    def dev_beam(alpha, size):  # BLEU and the repeats and loops of a beam search on dev
        texts = model.translate(dev_sources, method="beam", num_beams=args.num_beams,
                                length_penalty=alpha, no_repeat_ngram_size=size, batch_size=64,
                                **search)
        return {"bleu": corpus_bleu(texts, dev_references), **count_repetitions(texts)}

    by_alpha = {alpha: dev_beam(alpha, 0) for alpha in args.length_penalties}
    alpha = max(by_alpha, key=lambda key: by_alpha[key]["bleu"])
    record["dev_bleu_beam_by_length_penalty"] = {str(key): value["bleu"]
                                                 for key, value in by_alpha.items()}
    record["length_penalty"] = alpha
    # Then SearchConfig.no_repeat_ngram_size with that penalty (a tie: the smaller size).
    by_size = {size: dev_beam(alpha, size) if size else by_alpha[alpha]
               for size in sorted(set(args.no_repeat_ngram_sizes))}
    size = max(by_size, key=lambda key: by_size[key]["bleu"])
    record["dev_beam_by_no_repeat_ngram_size"] = {str(key): value for key, value in by_size.items()}
    record["no_repeat_ngram_size"] = size
    return model


def test_scores(record, model, args, test_pairs, directory):
    """The test half of `evaluate`: the test split translated once with the dev
    choices in `record`, greedy and beam, and scored."""
    search = search_settings(args)
    alpha, size = record["length_penalty"], record["no_repeat_ngram_size"]
    sources = [pair.source for pair in test_pairs]
    references = [pair.target for pair in test_pairs]
    timings = {}
    started = time.time()
    greedy = model.translate(sources, method="greedy", batch_size=64, **search)
    timings["greedy_seconds"] = round(time.time() - started, 1)
    started = time.time()
    beam = model.translate(sources, method="beam", num_beams=args.num_beams,
                           length_penalty=alpha, batch_size=64, **search)
    timings["beam_seconds"] = round(time.time() - started, 1)
    guarded, greedy_guarded = beam, greedy
    if size:
        started = time.time()
        guarded = model.translate(sources, method="beam", num_beams=args.num_beams,
                                  length_penalty=alpha, no_repeat_ngram_size=size, batch_size=64,
                                  **search)
        timings["beam_guarded_seconds"] = round(time.time() - started, 1)
        greedy_guarded = model.translate(sources, method="greedy", no_repeat_ngram_size=size,
                                         batch_size=64, **search)
        with open(os.path.join(directory, "test_guarded.tsv"), "w", encoding="utf-8") as handle:
            handle.write("verse\tgreedy\tbeam\n" + "".join(
                f"{pair.verse_id}\t{' '.join(g.split())}\t{' '.join(b.split())}\n"
                for pair, g, b in zip(test_pairs, greedy_guarded, guarded, strict=True)))
    chrf = [sentence_chrf(hypothesis, reference) for hypothesis, reference in
            zip(beam, references, strict=True)]
    record.update({
        "test_bleu_greedy": corpus_bleu(greedy, references),
        "test_bleu_beam": corpus_bleu(beam, references),
        "test_chrf_greedy": corpus_chrf(greedy, references),
        "test_chrf_beam": corpus_chrf(beam, references),
        "test_bleu_by_length_beam": scores_by_length(sources, beam, references,
                                                     buckets=LENGTH_BUCKETS),
        "test_bleu_by_length_greedy": scores_by_length(sources, greedy, references,
                                                       buckets=LENGTH_BUCKETS),
        "test_decode_timings": timings,
        "test_repetitions": {  # "beam" is the plain beam; "beam_guarded" has the chosen size
            "reference": count_repetitions(references), "greedy": count_repetitions(greedy),
            "beam": {"bleu": corpus_bleu(beam, references), **count_repetitions(beam)},
            "greedy_guarded": {"no_repeat_ngram_size": size,
                               "bleu": corpus_bleu(greedy_guarded, references),
                               **count_repetitions(greedy_guarded)},
            "beam_guarded": {"no_repeat_ngram_size": size, "bleu": corpus_bleu(guarded, references),
                             "chrf": corpus_chrf(guarded, references),
                             **count_repetitions(guarded)}},
        "examples": [{"verse": test_pairs[index].verse_id, "source": sources[index],
                      "reference": references[index], "beam": beam[index],
                      "greedy": greedy[index], "chrf": round(chrf[index], 1)}
                     for index in picked_verses(chrf)],
    })
    write_translations(os.path.join(directory, "test_translations.tsv"), test_pairs, greedy, beam,
                       chrf)
    return record


def picked_verses(chrf, per_group=3):
    """Indices of the best, the median and the worst verses by sentence chrF
    (`per_group` of each, in that order, without repeats)."""
    order = [int(index) for index in np.argsort(chrf, kind="stable")[::-1]]
    middle = len(order) // 2
    low = max(middle - per_group // 2, 0)
    picks = order[:per_group] + order[low:low + per_group] + order[-per_group:]
    return list(dict.fromkeys(picks))


TSV_COLUMNS = ("verse", "source", "reference", "greedy", "beam", "beam_chrf")


def write_translations(path, pairs, greedy, beam, chrf):
    """Every test verse with its greedy and beam translations and the beam's chrF."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\t".join(TSV_COLUMNS) + "\n")
        for pair, *row in zip(pairs, greedy, beam, chrf, strict=True):
            row[-1] = f"{row[-1]:.1f}"
            fields = [pair.verse_id, pair.source, pair.target, *row]
            handle.write("\t".join(" ".join(str(f).split()) for f in fields) + "\n")


def read_translations(path):
    with open(path, encoding="utf-8") as handle:
        header, *lines = handle.read().splitlines()
    if tuple(header.split("\t")) != TSV_COLUMNS:
        raise SystemExit(f"{path}: not a translations file of this example (header {header!r})")
    return [dict(zip(TSV_COLUMNS, line.split("\t"), strict=True)) for line in lines]


def translations_table(output_dir, names):
    """Markdown: the verses picked by the first model's beam chrF (best, median,
    worst) with the reference and every evaluated model's greedy and beam output."""
    tables = {name: read_translations(os.path.join(output_dir, name, "test_translations.tsv"))
              for name in names
              if os.path.exists(os.path.join(output_dir, name, "test_translations.tsv"))}
    if not tables:
        return ""
    first = next(iter(tables.values()))
    lines = [f"# Test verses of the Bible models ({', '.join(tables)})", "",
             "The best, median and worst test verses by the first model's beam chrF, with "
             "every model's greedy and beam translation (examples/spanish_to_english_bible.py).",
             ""]
    picks = picked_verses([float(row["beam_chrf"]) for row in first])
    groups = ["best"] * 3 + ["median"] * 3 + ["worst"] * 3
    for group, index in zip(groups, picks, strict=False):
        row = first[index]
        lines += [f"**{row['verse']}** ({group} by the {next(iter(tables))}'s beam chrF)", "",
                  "| | |", "|---|---|", f"| Spanish | {row['source']} |",
                  f"| reference | {row['reference']} |"]
        for name, rows in tables.items():
            other = rows[index]
            assert other["verse"] == row["verse"], (other["verse"], row["verse"])
            lines += [f"| {name}, greedy | {other['greedy']} |",
                      f"| {name}, beam (chrF {other['beam_chrf']}) | {other['beam']} |"]
        lines.append("")
    return "\n".join(lines)


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output-dir", default="runs/bible_es_en")
    parser.add_argument("--phase", choices=["train", "dev", "evaluate", "all"], default="all",
                        help="train; dev (the evaluate phase's choices on dev only, the test "
                        "split not translated); evaluate (the dev choices, reused from dev when "
                        "made with the same settings, then the test split); all: train and "
                        "evaluate")
    parser.add_argument("--source-module", default="spaRV1909eb")
    parser.add_argument("--target-module", default="engWEB2015eb")
    parser.add_argument("--models", default=DEFAULT_MODELS,
                        help=f"comma-separated, from {','.join(MODELS)} (default: %(default)s); "
                             "transformer_guided trains one cross-attention head to align")
    parser.add_argument("--source-vocabulary-size", type=int, default=6000)
    parser.add_argument("--target-vocabulary-size", type=int, default=5000)
    parser.add_argument("--shared-vocabulary-size", type=int, default=0,
                        help="one WordPiece vocabulary of this many ids for both languages, "
                             "with the Transformer's embeddings shared and tied to its output "
                             "(0: one vocabulary per language)")
    parser.add_argument("--max-pieces", type=int, default=100,
                        help="drop training pairs with more pieces on either side")
    parser.add_argument("--max-output-pieces", type=int, default=200,
                        help="most pieces generated per verse")
    parser.add_argument("--dev-examples", type=int, default=0,
                        help="dev verses (the first ones) scored after every epoch and for "
                             "the choices of the evaluate phase (0: the whole dev split; the "
                             "first verses are easier than the test split, so choices made "
                             "on a prefix do not transfer)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="most epochs (default: 100; 1 with --smoke)")
    parser.add_argument("--patience", type=int, default=4)
    parser.add_argument("--time-limit-minutes", type=float, default=None,
                        help="training budget per model (wall clock)")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="stop after this many optimizer steps (the `steps` a recorded run "
                             "gives in its history.json: the same training on any machine)")
    parser.add_argument("--resume", action="store_true",
                        help="a model whose directory holds epoch checkpoints goes on from the "
                        "newest (weights, optimizer state, history, early stopping, time and "
                        "step limits) instead of refusing to start")
    parser.add_argument("--keep-checkpoints", type=int, default=None,
                        help="last epochs kept for checkpoint averaging (default: 5; 2 with "
                        "--smoke); more than --patience, or --resume may find the best "
                        "epoch's weights gone")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--batch-tokens", type=int, default=None,
                        help="training batches by token count: each length bucket's batches "
                        "hold about this many pieces (rows x padded length) instead of "
                        "--batch-size verses (make_dataset's batch_tokens)")
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--dff", type=int, default=512)
    parser.add_argument("--transformer-dropout", type=float, default=0.1)
    parser.add_argument("--warmup-steps", type=int, default=1000)
    parser.add_argument("--lr-scale", type=float, default=1.0)
    parser.add_argument("--embedding-dim", type=int, default=256)
    parser.add_argument("--units", type=int, default=256)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--guided-alignment-weight", type=float, default=0.1,
                        help="transformer_guided: weight of the alignment loss (Marian's default)")
    parser.add_argument("--guided-alignment-layer", type=int, default=None,
                        help="transformer_guided: decoder layer of the guided head (default: "
                             "the penultimate)")
    parser.add_argument("--guided-alignment-head", type=int, default=0,
                        help="transformer_guided: the guided head")
    parser.add_argument("--num-beams", type=int, default=4)
    parser.add_argument("--length-penalties", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--no-repeat-ngram-sizes", type=int, nargs="+", default=[0],
                        help="SearchConfig.no_repeat_ngram_size values tried on dev with the "
                             "chosen length penalty (0: off); the best dev BLEU decodes test")
    parser.add_argument("--threads", type=int, default=0,
                        help="TensorFlow intra- and inter-op threads (0: TensorFlow's choice)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--figures-dir", default=None,
                        help="evaluate: also write the learning curves here as "
                             "bible_learning_curves.png (the docs' name), to be copied into "
                             "docs/images as a step of its own")
    parser.add_argument("--verbose", type=int, default=2, choices=[0, 1, 2])
    parser.add_argument("--smoke", action="store_true",
                        help="a few hundred verses, tiny models, a few steps (a test of the script)")
    return parser


def load_data(args):
    pairs, report = load_bible_pairs(args.source_module, args.target_module, return_report=True)
    splits = {split: [pair for pair in pairs if pair.split == split]
              for split in ("train", "dev", "test")}
    if args.smoke:
        splits = {"train": splits["train"][:400], "dev": splits["dev"][:12],
                  "test": splits["test"][:12]}
    return splits, report


def main(argv=None):
    args = make_parser().parse_args(argv)
    set_threads(args.threads)
    names = model_names(args.models, MODELS)
    if args.smoke:
        args.source_vocabulary_size = args.target_vocabulary_size = 400
        args.epochs, args.embedding_dim, args.units = args.epochs or 1, 16, 32
        args.layers, args.d_model, args.heads, args.dff = 1, 16, 2, 32
        args.num_beams, args.length_penalties, args.max_output_pieces = 2, [0.0], 24
        args.keep_checkpoints = args.keep_checkpoints or 2
        args.shared_vocabulary_size = args.shared_vocabulary_size and 600
    args.epochs, args.keep_checkpoints = args.epochs or 100, args.keep_checkpoints or 5
    try:
        splits, report = load_data(args)
    except SwordError as error:
        print(f"Skipping the Spanish → English example: {error}")
        return None
    print(f"verse pairs: {report}", flush=True)
    dev_pairs = splits["dev"][: args.dev_examples or None]
    os.makedirs(args.output_dir, exist_ok=True)
    results_path = os.path.join(args.output_dir, "results.json")
    if args.phase in ("train", "all"):
        tokenizers = make_tokenizers(splits["train"], args.source_vocabulary_size,
                                     args.target_vocabulary_size, args.shared_vocabulary_size)
        print(f"WordPiece: {tokenizers[0].vocabulary_size} Spanish / "
              f"{tokenizers[1].vocabulary_size} English ids", flush=True)
        batching = ({"batch_size": None, "batch_tokens": args.batch_tokens} if args.batch_tokens
                    else {"batch_size": args.batch_size})
        data = (
            make_dataset([(p.source, p.target) for p in splits["train"]], *tokenizers,
                         seed=args.seed, bucket_boundaries="auto", **batching,
                         max_source_length=args.max_pieces, max_target_length=args.max_pieces),
            make_dataset([(p.source, p.target) for p in splits["dev"]], *tokenizers,
                         batch_size=args.batch_size, shuffle=False,
                         max_source_length=POSITIONS, max_target_length=POSITIONS - 1),
        )
        if "transformer_guided" in names:  # eflomal's links of the training verses only
            started = time.time()
            links = reference_alignments(
                [p.source for p in splits["train"]], [p.target for p in splits["train"]],
                *tokenizers, cache_path=os.path.join(args.output_dir, "reference_links.npz"))
            print(f"reference links: {sum(len(row) for row in links):,} piece links for "
                  f"{len(links):,} training verses ({time.time() - started:.0f} s)", flush=True)
            guided_data = (
                make_dataset([(p.source, p.target) for p in splits["train"]], *tokenizers,
                             seed=args.seed, **batching,
                             bucket_boundaries="auto", max_source_length=args.max_pieces,
                             max_target_length=args.max_pieces, alignments=links),
                data[1])
        for name in names:
            train(name, args, guided_data if name == "transformer_guided" else data,
                  tokenizers, dev_pairs)
    if args.phase == "train":
        return None
    if args.phase == "dev":  # the dev choices only: the test split is not translated
        chosen = {}
        for name in names:
            record = evaluate(name, args, dev_pairs, None)
            chosen[name] = {key: record[key] for key in DEV_FIELDS if key in record}
            beam = record["dev_beam_by_no_repeat_ngram_size"][str(record["no_repeat_ngram_size"])]
            print(f"{name}: dev BLEU greedy {record['dev_bleu_greedy_best_epoch']:.2f} best "
                  f"epoch / {record.get('dev_bleu_greedy_averaged', float('nan')):.2f} averaged; "
                  f"beam {args.num_beams} (length penalty {record['length_penalty']}, "
                  f"no_repeat_ngram_size {record['no_repeat_ngram_size']}) "
                  f"{beam['bleu']:.2f}", flush=True)
        return chosen
    results = {"data": report, "dev_pairs_scored": len(dev_pairs),
               "test_pairs": len(splits["test"]), "arguments": vars(args), "models": {}}
    if os.path.exists(results_path):  # models evaluated by an earlier run stay
        with open(results_path, encoding="utf-8") as handle:
            earlier = json.load(handle)
        results["models"] = {name: scores for name, scores in earlier["models"].items()
                             if name not in names}
        results["arguments_of_earlier_runs"] = earlier.get("arguments_of_earlier_runs", []) + [
            earlier["arguments"]]
    for name in names:
        results["models"][name] = evaluate(name, args, dev_pairs, splits["test"])
        write_json(results_path, results)  # never a half-written file
    ordered = [name for name in MODELS if name in results["models"]]
    results["models"] = {name: results["models"][name] for name in ordered}
    print_report(results, args.output_dir, f"test split ({len(splits['test'])} verses), "
                 "sacreBLEU (cased, 13a) / chrF:", args.num_beams, digits=2,
                 score_title=f"dev BLEU (greedy, {len(dev_pairs)} dev verses)",
                 **({"x": "fit_minutes", "x_label": "minutes of fit"}
                    if all("fit_minutes" in scores["history"]
                           for scores in results["models"].values()) else {}))
    with open(os.path.join(args.output_dir, "translations.md"), "w", encoding="utf-8") as handle:
        handle.write(translations_table(args.output_dir, ordered))
    if args.figures_dir:
        os.makedirs(args.figures_dir, exist_ok=True)
        shutil.copyfile(os.path.join(args.output_dir, "learning_curves.png"),
                        os.path.join(args.figures_dir, "bible_learning_curves.png"))
    return results



if __name__ == "__main__":
    main()
