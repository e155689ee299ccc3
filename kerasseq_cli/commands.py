"""The commands of the `kerasseq` command line (train, translate, evaluate, demo,
export, average); `kerasseq_cli` parses the arguments and calls them.

Imported by `kerasseq_cli.main` only when a command runs: this module imports
TensorFlow (through kerasseq). The defaults of every option live in the
parser (`kerasseq_cli.make_parser`); the commands read `args.NAME`. A user
error is a `CLIError` (or a `ValueError` / `FileNotFoundError`), which `main`
prints as one line, `kerasseq COMMAND: error: ...`, with exit status 2.
"""

import contextlib
import json
import os
import signal
import sys
import time
import zipfile

import keras
import tensorflow as tf

from kerasseq.alignment import from_pharaoh, to_pharaoh
from kerasseq.data.corpora import learn_tokenizers, load_pairs, spread_sample
from kerasseq.decoding.config import SearchConfig
from kerasseq.evaluation import corpus_bleu, corpus_chrf, g2p_error_rates
from kerasseq.export import (
    ALIGNMENTS_SIGNATURE,
    NBEST_SIGNATURE,
    SERVING_SIGNATURE,
    CTranslate2Translator,
    check_export_path,
    export_ctranslate2,
    export_translator,
    is_ctranslate2_model,
    is_saved_model,
    load_translator,
    read_metadata,
)
from kerasseq.models import Ensemble, build_rnn_seq2seq, build_transformer_seq2seq
from kerasseq.training import (
    MaskedSparseCategoricalCrossentropy,
    MaskedTokenAccuracy,
    NonFiniteLossError,
    TrainingRun,
    average_checkpoints,
    epoch_checkpoints,
    transformer_optimizer,
)
from kerasseq.training.distribute import check_global_batch_size, get_strategy
from kerasseq.training.run import TENSORBOARD_DIR
from kerasseq.training.tensorboard import TranslationSummaries
from kerasseq.training.trainer import (
    WorkerLostError,
    is_lost_peer_error,
    worker_lost_error,
)
from kerasseq_cli import CLIError, first_line


def _flag_error(error, flags):
    """A `CLIError` for the `ValueError` of a kerasseq check, naming the flag that
    set the argument: kerasseq's argument errors (`kerasseq._validation.ArgumentError`,
    `SearchConfigError`) carry the argument's name in `.field`, `flags` maps such
    names to flags."""
    flag = flags.get(getattr(error, "field", None))
    return CLIError(f"{flag}: {error}" if flag else str(error))


# -------------------------------------------------------------------- model
def build_model(args, source_tokenizer, target_tokenizer):
    if args.model not in ("rnn", "transformer"):
        raise CLIError(f"--model must be 'rnn' or 'transformer'. Received: {args.model!r}")
    if args.model == "transformer":
        # The position table bounds sources and targets alike; searches stop at
        # --max-target-length by default.
        positions = args.max_positions or args.max_target_length
        if args.max_target_length > positions:
            raise CLIError(f"--max-target-length {args.max_target_length} must be <= "
                           f"--max-positions {positions} (the position table)")
        return build_transformer_seq2seq(
            num_layers=args.num_layers, d_model=args.d_model, num_heads=args.num_heads,
            dff=args.dff, dropout=args.dropout, max_positions=positions,
            max_target_length=args.max_target_length,
            source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer,
        )
    if args.max_positions is not None:
        raise CLIError("--max-positions applies to --model transformer (an RNN has no "
                       "position table)")
    attention = None if args.attention == "none" else args.attention
    return build_rnn_seq2seq(
        embedding_dim=args.embedding_dim, units=args.units, attention=attention,
        dropout=args.dropout, num_encoder_layers=args.encoder_layers,
        max_target_length=args.max_target_length,
        source_tokenizer=source_tokenizer, target_tokenizer=target_tokenizer,
    )


def make_optimizer(args):
    """Adam at --learning-rate, or with --warmup-steps the Transformer schedule
    (Vaswani et al. 2017: linear warm-up, then 1/sqrt(step) decay, Adam β2 = 0.98)."""
    if args.warmup_steps:
        width = args.d_model if args.model == "transformer" else args.units
        return transformer_optimizer(width, warmup_steps=args.warmup_steps, clipnorm=args.clipnorm)
    return keras.optimizers.Adam(args.learning_rate, clipnorm=args.clipnorm)


def load_model(path):
    """The kerasseq model of a `.keras` file or a run directory (its `model.keras`).

    A comma-separated list of them (`a.keras,b.keras`) loads each and returns
    one `kerasseq.models.Ensemble` (a path that exists is never split).
    """
    if "," in path and not os.path.exists(path):
        return load_ensemble([part.strip() for part in path.split(",") if part.strip()])
    model_file = os.path.join(path, "model.keras") if os.path.isdir(path) else path
    if not os.path.exists(model_file):
        raise CLIError(f"no kerasseq model at {path!r} (expected a .keras file or a directory "
                       "with model.keras)")
    check_keras_archive(model_file)
    try:
        model = keras.models.load_model(model_file)
    except Exception as error:  # noqa: BLE001  (reported as one line)
        # Keras errors span many lines (the whole config); keep the first.
        raise CLIError(f"{model_file!r} is not a loadable kerasseq model: "
                       f"{first_line(error)}") from None
    if not hasattr(model, "decode_step"):
        raise CLIError(f"{model_file!r} is a Keras model but not a kerasseq seq2seq model")
    return model


def check_keras_archive(path):
    """Refuse a `.keras` file that is no zip archive (truncated, overwritten),
    naming the path and the zip error: Keras reports such a file as "File not found"."""
    if not path.endswith(".keras"):
        return
    try:
        zipfile.ZipFile(path).close()
    except (zipfile.BadZipFile, OSError) as error:
        raise CLIError(f"{path!r} is corrupt or unreadable: a .keras file is a zip archive "
                       f"and this one cannot be opened ({error})") from None


def load_ensemble(paths):
    """One `kerasseq.models.Ensemble` of the models at `paths` (one path: that model)."""
    if not paths:
        raise CLIError("no model given: expected MODEL or MODEL_A,MODEL_B,...")
    models = [load_model(path) for path in paths]
    if len(models) == 1:
        return models[0]
    try:
        return Ensemble(models)
    except (TypeError, ValueError) as error:
        raise CLIError(f"cannot ensemble {','.join(paths)}: {first_line(error)}") from None


def _slow_batches_callback(seconds, stop_after=None):
    """Testing aid for the hidden `--slow-batches SECONDS` and `--stop-after-batch
    EPOCH:BATCH` options (tests/test_resume.py, tests/training/test_multi_worker.py).

    After every training batch, prints `kerasseq-debug: epoch E batch B done`
    on stderr and sleeps `seconds`. After batch `stop_after` (an `(epoch,
    batch)` pair), the process stops itself (SIGSTOP) right after that line,
    so that a test can kill it at exactly that point in the middle of an
    epoch, however long the test takes to read the line.
    """
    class SlowBatches(keras.callbacks.Callback):
        epoch = 0

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            print(f"kerasseq-debug: epoch {self.epoch} batch {batch} done", file=sys.stderr, flush=True)
            if (self.epoch, batch) == stop_after:
                os.kill(os.getpid(), signal.SIGSTOP)
            if seconds:
                time.sleep(seconds)

    return SlowBatches()


def _tensorboard_callbacks(args, run, dev_references):
    """Keras' TensorBoard (loss, token accuracy, learning rate per epoch) and
    `TranslationSummaries` (dev WER or BLEU, attention heatmap) into OUTPUT_DIR/tensorboard."""
    log_dir = run.path(TENSORBOARD_DIR)
    callbacks = [keras.callbacks.TensorBoard(log_dir, write_graph=False)]
    count = args.tensorboard_sources
    sources = spread_sample(sorted(dev_references), count) if count else []
    if sources:
        metric = "wer" if args.dataset == "cmudict" else "bleu"
        callbacks.append(TranslationSummaries(log_dir, sources,
                                              [dev_references[s] for s in sources], metric=metric))
    return callbacks


def train(args):
    """Train into `args.output_dir` following the rules of `kerasseq.training.TrainingRun`.

    A rerun of the same command resumes an interrupted run; on a finished run
    it does nothing (and returns the saved model) unless `--epochs` is larger,
    in which case it continues from the backup; `--overwrite` starts over.
    This function only turns the arguments into data, a model and a
    `TrainingRun`; the run directory's files and their rules live there.
    """
    strategy_name = args.strategy
    try:
        # First: MultiWorkerMirroredStrategy must exist before TensorFlow runs anything.
        strategy = get_strategy(strategy_name, collective_timeout=(
            args.collective_timeout if strategy_name == "multi_worker" else None))
    except ValueError as error:  # TF_CONFIG missing or malformed (ClusterConfigError)
        raise CLIError(str(error)) from None
    # --batch-tokens: --batch-size only caps the rows (None: no cap); else 64 by default
    batch_size = args.batch_size if args.batch_tokens or args.batch_size else 64
    try:  # before any data is read or any file of the run replaced
        if batch_size is not None:
            check_global_batch_size(batch_size, strategy.num_replicas_in_sync)
        if args.batch_tokens and strategy_name == "multi_worker":
            raise ValueError("--batch-tokens works on one machine only: under the multi_worker "
                             "strategy every worker steps with the same rows, which batches by "
                             "token count do not keep; use --batch-size")
    except ValueError as error:
        raise _flag_error(error, {"batch_size": "--batch-size"}) from None
    keras.utils.set_random_seed(args.seed)
    try:
        run = TrainingRun(args.output_dir, overwrite=args.overwrite,
                          strategy=strategy)
        status = run.status(args.epochs)
    except (ValueError, WorkerLostError) as error:
        raise _flag_error(error, {"output_dir": "--output-dir"}) from None
    if status == "complete":
        print(f"{args.output_dir}: the run is complete ({run.completed_epochs()} epochs); nothing "
              "to do (a larger --epochs continues it, --overwrite starts over)")
        return load_model(run.model_path) if run.is_chief else None
    completed_epochs = run.completed_epochs()
    on_bad_line = args.on_bad_line
    train_pairs, _ = load_pairs(args.dataset, "train", args.max_train_examples, on_bad_line)
    dev_pairs, dev_references = load_pairs(args.dataset, "dev", args.max_dev_examples,
                                           on_bad_line)
    try:
        source_tokenizer, target_tokenizer = run.tokenizers(
            *learn_tokenizers(args.dataset, train_pairs, args.tokenizer, args.vocabulary_size))
    except ValueError as error:
        raise _flag_error(error, {"vocabulary_size": "--vocabulary-size",
                                  "output_dir": "--output-dir"}) from None
    with strategy.scope():
        model = build_model(args, source_tokenizer, target_tokenizer)
        model.compile(
            optimizer=make_optimizer(args),
            loss=MaskedSparseCategoricalCrossentropy(label_smoothing=args.label_smoothing),
            metrics=[MaskedTokenAccuracy()],
        )
    # What the strategy needs (one machine or each worker's shard): TrainingRun decides.
    # Fixed batch shapes where Keras' `fit` compiles with XLA (its "auto": a GPU),
    # one program per shape; without XLA each batch is only as long as its
    # longest sequence, which made a steady epoch of the README RNN 22 % shorter
    # on CPU (benchmarks/README.md, "Training compiles").
    train_data, dev_data = run.datasets(train_pairs, dev_pairs, source_tokenizer,
                                        target_tokenizer, batch_size, seed=args.seed,
                                        fixed_shapes=bool(model.jit_compile),
                                        batch_tokens=args.batch_tokens)
    extra = ([_slow_batches_callback(args.slow_batches, args.stop_after_batch)]
             if args.slow_batches or args.stop_after_batch else [])
    if run.is_chief and args.tensorboard:  # (the chief only writes files)
        extra += _tensorboard_callbacks(args, run, dev_references)
    started = time.time()
    try:
        history = run.fit(model, train_data, dev_data, epochs=args.epochs,
                          verbose=args.verbose, callbacks=extra,
                          keep_checkpoints=args.keep_checkpoints or 0)
    except (NonFiniteLossError, WorkerLostError) as error:
        raise CLIError(str(error)) from None
    summary = {"train_seconds": round(time.time() - started, 1), "epochs": args.epochs,
               "initial_epoch": completed_epochs, "epochs_run": len(history.epoch),
               "parameters": int(model.count_params()), "train_pairs": len(train_pairs)}
    if args.dataset == "cmudict" and args.evaluate_words:
        words = spread_sample(list(dev_references), args.evaluate_words)
        # A quick greedy check after training (labelled so); `kerasseq evaluate`
        # scores with the shared search defaults (beam 4).
        summary["dev"] = evaluate_g2p(model, words, [dev_references[w] for w in words],
                                      SearchConfig(method="greedy", batch_size=256))
        print(f"dev ({len(words)} words, greedy): WER {summary['dev']['wer']:.2%}  "
              f"PER {summary['dev']['per']:.2%}")
    try:
        run.finish(model, summary)
    except ValueError as error:
        raise CLIError(str(error)) from None
    return model


def evaluate_g2p(model, words, references, config, verbose=0):
    """WER/PER of `model.translate(words, config)` (`config`: a `SearchConfig`)."""
    hypotheses = model.translate(words, config, verbose=verbose)
    return g2p_error_rates(hypotheses, references)


# ----------------------------------------------------------------- commands
def command_train(args):
    try:
        train(args)
    except tf.errors.OpError as error:
        # A worker lost outside the training loop (while the model's variables
        # are created and broadcast, say): the same one line as inside it.
        if not is_lost_peer_error(error):
            raise
        raise CLIError(str(worker_lost_error(error))) from None
    print(f"model: {os.path.join(args.output_dir, 'model.keras')}")


# The flag that sets each SearchConfig field, to name it in an error.
_SEARCH_FLAGS = {"num_beams": "--beam", "num_return": "--nbest",
                 "length_penalty": "--length-penalty", "max_length": "--max-length",
                 "no_repeat_ngram_size": "--no-repeat-ngram-size", "ban_unk": "--ban-unk",
                 "max_source_length": "--max-source-length"}


def _search_config(args, **fields):
    """The command's one `SearchConfig`, from `--beam`, `--nbest`, `--length-penalty`,
    `--no-repeat-ngram-size`, `--jit` (and `fields`, e.g. export's `max_length`).

    Only what was given: the rest keeps `kerasseq.SearchConfig`'s defaults
    (beam search, 4 beams, `jit_compile="auto"`), the same as the Python API
    and `kerasseq export`. `--beam 1` is greedy search. `SearchConfig` is the
    one validator: it checks the settings here, once, before any model is
    loaded, and its message is reported with the flag that set the field. The
    command hands this object on (`config=`) as it is.
    """
    fields.update(num_return=args.nbest, length_penalty=args.length_penalty,
                  no_repeat_ngram_size=args.no_repeat_ngram_size, ban_unk=args.ban_unk)
    search = {key: value for key, value in fields.items() if value is not None}
    if args.beam == 1:
        search["method"] = "greedy"
    elif args.beam is not None:
        search.update(method="beam", num_beams=args.beam)
    search["jit_compile"] = {"on": True, "off": False}.get(args.jit, "auto")
    try:
        return SearchConfig(**search)
    except ValueError as error:
        if (getattr(error, "field", None) == "num_return" and search.get("method") == "greedy"
                and search["num_return"] > 1):
            raise CLIError(f"--nbest {search['num_return']} needs --beam N with "
                           f"N >= {search['num_return']} (--beam 1 is greedy search)") from None
        raise _flag_error(error, _SEARCH_FLAGS) from None


def load_saved_model_translator(path, args):
    """A function `texts -> translations` that calls an exported SavedModel.

    `kerasseq.export.load_translator` loads it and checks the format (only an
    export of `kerasseq export` is accepted; anything else is a one-line
    `CLIError`, before stdin is read). The search is fixed at export time:
    `--beam` / `--length-penalty` must match the recorded settings when
    given; `--nbest N` reads the first N columns of the `translate_nbest`
    signature; `--alignments` reads `translate_alignments`.
    """
    _search_config(args)  # checked as for a .keras model, before comparing with the export
    nbest = args.nbest if args.nbest and args.nbest > 1 else None
    if args.alignments and nbest:
        raise CLIError("--alignments with a SavedModel gives the best translation's "
                       "links only; drop --nbest")
    signature = (ALIGNMENTS_SIGNATURE if args.alignments
                 else NBEST_SIGNATURE if nbest else SERVING_SIGNATURE)
    # The flags against the recorded settings first (no SavedModel load for a
    # wrong flag); a directory that is no kerasseq export is load_translator's error.
    metadata = read_metadata(path) or {}
    exported_beams = metadata.get("num_beams")
    if args.beam is not None and exported_beams is not None and args.beam != exported_beams:
        raise CLIError(f"{path!r} was exported with num_beams={exported_beams} "
                       f"(method={metadata.get('method')}); the search is fixed at export time: "
                       f"re-export with --beam {args.beam}")
    exported_penalty = metadata.get("length_penalty")
    if (args.length_penalty is not None and exported_penalty is not None
            and args.length_penalty != exported_penalty):  # --length-penalty 0 included
        raise CLIError(f"{path!r} was exported with length_penalty={exported_penalty}; "
                       f"re-export with --length-penalty {args.length_penalty}")
    exported_size = metadata.get("no_repeat_ngram_size", 0)
    if args.no_repeat_ngram_size is not None and args.no_repeat_ngram_size != exported_size:
        raise CLIError(f"{path!r} was exported with no_repeat_ngram_size={exported_size}; "
                       f"re-export with --no-repeat-ngram-size {args.no_repeat_ngram_size}")
    if args.ban_unk and not metadata.get("ban_unk", False):
        raise CLIError(f"{path!r} was exported with ban_unk=False; re-export with --ban-unk")
    if args.alignments:
        if args.alignment_layer is not None or args.alignment_head is not None:
            raise CLIError(f"{path!r} aligns with the attention chosen at export time "
                           f"(layer {metadata.get('alignment_layer')}, head "
                           f"{metadata.get('alignment_head')}); re-export to choose another")
    try:
        served, _ = load_translator(path, signature)
    except ValueError as error:
        raise CLIError(str(error)) from None
    if args.alignments:

        def translate_with_links(texts):  # "translation<TAB>i-j ..." (the served Pharaoh text)
            outputs = served(texts)
            return [f"{text.decode('utf-8')}\t{checked(links)}" for text, links in
                    zip(outputs["translation"], outputs["alignment"], strict=True)]

        def checked(links):  # a disguised export may serve anything: one line, not a traceback
            text = links.decode("utf-8")
            try:
                from_pharaoh(text)
            except ValueError as error:
                raise CLIError(f"{path!r}: {error}") from None
            return text

        return translate_with_links

    def translate(texts):
        if not nbest:
            return [item.decode("utf-8") for item in served(texts)["translation"]]
        outputs = served(texts)["translations"]  # (batch_size, num_return)
        if outputs.shape[1] < nbest:
            raise CLIError(f"--nbest {nbest}: {path!r} returns {outputs.shape[1]} hypotheses "
                           "per text; re-export with a larger --nbest")
        return [[item.decode("utf-8") for item in row[:nbest]] for row in outputs]

    return translate


def _layer_or_head(name, value):
    """`"mean"` or an int, from the text of --alignment-layer / --alignment-head."""
    if value == "mean":
        return value
    try:
        return int(value)
    except ValueError:
        raise CLIError(f"--{name} must be an integer index or 'mean'. Received: {value!r}") from None


def _alignment_head_settings(args):
    """`alignment_layer` / `alignment_head` keywords from the flags that were given."""
    return {f"alignment_{name}": _layer_or_head(f"alignment-{name}", value)
            for name, value in (("layer", args.alignment_layer),
                                ("head", args.alignment_head)) if value is not None}


def load_ctranslate2_translator(path, args):
    """`texts -> translations` of a CTranslate2 export (`kerasseq.export.CTranslate2Translator`),
    with the search flags of a .keras model (same defaults: beam search, 4 beams)."""
    if args.alignments:
        raise CLIError(f"{path!r} is a CTranslate2 export: --alignments needs a .keras model "
                       "or a SavedModel exported with --alignments")
    config = _search_config(args)
    try:
        return CTranslate2Translator(path, config).translate
    except ImportError as error:
        raise CLIError(str(error)) from None
    except ValueError as error:
        raise _flag_error(error, _SEARCH_FLAGS) from None


def command_translate(args):
    alignments = args.alignments
    if is_saved_model(args.model_dir):  # --alignments: its translate_alignments signature
        translate = load_saved_model_translator(args.model_dir, args)
    elif is_ctranslate2_model(args.model_dir):
        translate = load_ctranslate2_translator(args.model_dir, args)
    else:
        config = _search_config(args)
        model = load_model(args.model_dir)
        which = _alignment_head_settings(args)

        def translate(texts):
            if not alignments:
                return model.translate(texts, config)
            try:
                translations, links = model.translate(
                    texts, config, return_alignments=True, **which)
            except ValueError as error:
                raise CLIError(str(error)) from None
            lines = []
            for translation, row in zip(translations, links, strict=True):
                if isinstance(translation, list):  # n-best: hypotheses and links by " | "
                    lines.append(" | ".join(translation) + "\t"
                                 + " | ".join(to_pharaoh(item) for item in row))
                else:
                    lines.append(f"{translation}\t{to_pharaoh(row)}")
            return lines

    # One output line per input line: a blank text translates to "" (the rule
    # of the Python API and of exports), so outputs stay aligned with inputs.
    texts = ([replace_invalid_utf8(text) for text in args.texts] if args.texts
             else read_stdin_lines())
    if not texts:
        raise CLIError("no text to translate: pass texts as arguments or on standard input")
    for text, translation in zip(texts, translate(texts), strict=True):
        if isinstance(translation, list):
            print(text + "\t" + " | ".join(translation))
        else:
            print(f"{text}\t{translation}")


def replace_invalid_utf8(text):
    """`text` with the bytes that were not valid UTF-8 as U+FFFD, as an export does.

    Python keeps such bytes of a command-line argument (or of stdin in a C
    locale) as lone surrogates (`surrogateescape`); each maximal invalid
    sequence becomes one U+FFFD (`bytes.decode(errors="replace")`).
    """
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def read_stdin_lines():
    """The lines of standard input as text, line ends dropped.

    Read as bytes and decoded as UTF-8 whatever the locale, invalid bytes
    replaced by U+FFFD: the rule of an export
    (`tf.strings.unicode_transcode(errors="replace")`), so one bad line is
    translated (its bad bytes as an unknown character) instead of stopping
    the corpus, and the output keeps one line per input line.
    """
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text stream without bytes (e.g. replaced in a test)
        return [replace_invalid_utf8(line.rstrip("\r\n")) for line in sys.stdin]
    return [line.decode("utf-8", "replace").rstrip("\r\n") for line in stream]


def command_evaluate(args):
    """Prints one JSON object on stdout (`kerasseq evaluate ... > scores.json`);
    the progress bar goes to stderr."""
    g2p = args.dataset == "cmudict"
    config = _search_config(args, batch_size=256 if g2p else 64)
    model = load_model(args.model_dir)
    _, references = load_pairs(args.dataset, args.split, args.limit,
                               args.on_bad_line)
    sources = list(references)
    check_vocabulary_match(model, sources, args)
    with progress_on_stderr():
        if g2p:
            rates = evaluate_g2p(model, sources, [references[w] for w in sources], config,
                                 verbose=1)
        else:
            rates = evaluate_translation(model, sources, [references[s] for s in sources],
                                         config)
    print(json.dumps({"split": args.split, **rates}))


def progress_on_stderr():
    """A context in which Keras' progress bars (`keras.utils.Progbar`, which
    writes to `sys.stdout`) go to stderr, so stdout holds only the results."""
    sys.stdout.flush()
    return contextlib.redirect_stdout(sys.stderr)


def unknown_token_rate(tokenizer, texts):
    """`(unknown, total)`: source tokens of `texts` that `tokenizer` maps to `[UNK]`."""
    ids = tokenizer.encode(list(texts))  # ragged (num_texts, None)
    flat_ids = ids.flat_values.numpy()  # (total,)
    return int((flat_ids == tokenizer.unk_id).sum()), int(flat_ids.size)


def check_vocabulary_match(model, sources, args):
    """Refuse to evaluate on data whose source text the model mostly cannot read.

    A model trained on other data silently maps every unknown character or
    word to `[UNK]` and scores near zero; above `--max-unknown-rate` unknown
    source tokens that is reported as a one-line error instead.
    """
    tokenizer = getattr(model, "source_tokenizer", None)
    if tokenizer is None or not sources:
        return  # model.translate reports a model without tokenizers
    unknown, total = unknown_token_rate(tokenizer, sources)
    rate = unknown / total if total else 0.0
    if rate > args.max_unknown_rate:
        raise CLIError(
            f"the vocabulary of --dataset {args.dataset} does not match the model's: "
            f"{rate:.1%} of its source tokens ({unknown} of {total}, split {args.split}) are "
            f"unknown to {args.model_dir!r} (--max-unknown-rate {args.max_unknown_rate:g}); "
            "evaluate on the data the model was trained on"
        )


def evaluate_translation(model, sources, references, config):
    """Corpus BLEU and chrF (sacreBLEU) of the translations with the `SearchConfig`
    `config`, with a progress bar."""
    hypotheses = model.translate(sources, config, verbose=1)
    return {"bleu": corpus_bleu(hypotheses, references),
            "chrf": corpus_chrf(hypotheses, references), "sentences": len(sources)}


def command_export_ctranslate2(args):
    """`kerasseq export MODEL DIR --format ctranslate2 [--quantization TYPE]`."""
    given = [flag for flag, value in (
        ("--beam", args.beam), ("--nbest", args.nbest), ("--length-penalty", args.length_penalty),
        ("--no-repeat-ngram-size", args.no_repeat_ngram_size), ("--ban-unk", args.ban_unk or None),
        ("--max-length", args.max_length),
        ("--max-source-length", args.max_source_length), ("--alignments", args.alignments or None),
        ("--jit", None if args.jit == "auto" else args.jit)) if value is not None]
    if given:
        raise CLIError(f"{', '.join(given)}: a CTranslate2 export stores no search settings; "
                       "give them when translating (kerasseq translate EXPORT_DIR --beam N ...)")
    model = load_model(args.model_dir)
    try:
        path = export_ctranslate2(model, args.export_dir, args.quantization,
                                  overwrite=args.overwrite)
    except (FileExistsError, ImportError) as error:
        raise CLIError(str(error)) from None
    print(f"exported {path} (CTranslate2, weights {args.quantization or 'float32'})")


def command_export(args):
    # Before loading the model: only an earlier export (of the same format) or
    # an empty directory may be replaced, and only with --overwrite.
    kind = args.format
    try:
        check_export_path(os.path.abspath(args.export_dir), overwrite=args.overwrite, kind=kind)
    except FileExistsError as error:
        raise CLIError(str(error).replace("overwrite=True", "--overwrite")) from None
    if kind == "ctranslate2":
        return command_export_ctranslate2(args)
    if args.quantization is not None:
        raise CLIError("--quantization applies to --format ctranslate2")
    config = _search_config(args, max_length=args.max_length,
                            max_source_length=args.max_source_length)
    which = _alignment_head_settings(args)
    if which and not args.alignments:
        raise CLIError("--alignment-layer / --alignment-head choose the attention of "
                       "--alignments; pass --alignments too")
    model = load_model(args.model_dir)
    try:
        # --nbest names translate_nbest's columns (default: every beam, make_translator)
        nbest = {} if args.nbest is None else {"num_return": config.num_return}
        path = export_translator(model, args.export_dir, config, overwrite=args.overwrite,
                                 alignments=args.alignments, **which, **nbest)
    except FileExistsError as error:
        raise CLIError(str(error)) from None
    except ValueError as error:  # a model's own search limit, --alignments without attention
        raise _flag_error(error, _SEARCH_FLAGS) from None
    signatures = ("serving_default (text -> translation, score), "
                  "translate_nbest (text -> translations, scores)")
    if args.alignments:
        signatures += ", translate_alignments (text -> translation, score, alignment)"
    print(f"exported {path} (method={config.method}, num_beams={config.effective_num_beams}); "
          f"signatures: {signatures}")


def average_inputs(inputs, last=None):
    """The `.keras` checkpoints named by `kerasseq average`'s inputs, in order.

    A `.keras` file is itself; a directory is a training run (its
    `checkpoints/epoch_XXX.keras`, see `train --keep-checkpoints`) or a
    directory of `epoch_XXX.keras` files. `last` keeps the last N of them.
    """
    paths = []
    for item in inputs:
        if os.path.isdir(item):
            found = (epoch_checkpoints(os.path.join(item, "checkpoints"))
                     or epoch_checkpoints(item))
            if not found:
                raise CLIError(f"{item!r} holds no epoch_XXX.keras checkpoints (nor does its "
                               "checkpoints/); train with --keep-checkpoints N")
            paths.extend(found)
        elif os.path.isfile(item):
            paths.append(item)
        else:
            raise CLIError(f"no checkpoint at {item!r} (expected a .keras file or a run directory)")
    return paths[-last:] if last else paths


def command_average(args):
    """`kerasseq average OUT.keras IN.keras ... | RUN_DIR`: one model, the mean of the weights."""
    if not args.output.endswith(".keras"):
        raise CLIError(f"OUTPUT must be a .keras file. Received: {args.output!r}")
    if os.path.isdir(args.output):
        raise CLIError(f"OUTPUT {args.output!r} is a directory")
    if os.path.exists(args.output) and not args.overwrite:
        raise CLIError(f"{args.output!r} already exists; pass --overwrite to replace it")
    paths = average_inputs(args.checkpoints, args.last)
    average_checkpoints(paths, output=args.output)
    print(f"averaged {len(paths)} checkpoint(s) into {args.output}:")
    for path in paths:
        print(f"  {path}")


def _program():
    """How this command was started: the console script's path, else `kerasseq`."""
    return sys.argv[0] if os.path.basename(sys.argv[0]) == "kerasseq" else "kerasseq"


def command_demo(args):
    # The parser's defaults make the demo a CMUdict G2P model with an LSTM encoder,
    # Bahdanau attention and a GRU decoder; every training flag still applies.
    what = ("a Transformer" if args.model == "transformer" else
            f"an LSTM encoder + {args.attention} attention + GRU decoder"
            if args.attention != "none" else "an LSTM encoder + GRU decoder")
    print(f"kerasseq demo: training {what} on {args.max_train_examples} examples of "
          f"{args.dataset} for {args.epochs} epochs")
    model = train(args)
    print(f"parameters: {model.count_params():,}")
    words = ["hello", "world", "keras", "sequence", "attention", "translation", "kerasseq"]
    for word, phonemes in zip(words, model.translate(words), strict=True):
        print(f"  {word:12s} -> {phonemes}")
    print(f"model saved to {os.path.join(args.output_dir, 'model.keras')}; try:\n"
          f"  {_program()} translate {args.output_dir} tensorflow --beam 4")
    keras.backend.clear_session()

