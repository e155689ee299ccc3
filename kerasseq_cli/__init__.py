"""The `kerasseq` command line: argument parsing and `main`, standard library only.

    kerasseq train --dataset cmudict --model rnn --epochs 10 --output-dir runs/g2p
    kerasseq translate runs/g2p hello world --beam 4
    kerasseq export runs/g2p runs/g2p_export --beam 4
    kerasseq translate runs/g2p_export hello world
    kerasseq export runs/t runs/t_ct2 --format ctranslate2 --quantization int8
    kerasseq translate runs/t_ct2 hello world
    kerasseq evaluate runs/g2p --split dev
    kerasseq train ... --keep-checkpoints 5 --output-dir runs/g2p
    kerasseq average runs/g2p/averaged.keras runs/g2p        # its last 5 epochs
    kerasseq translate runs/g2p/model.keras,runs/g2p_b/model.keras hello   # an ensemble
    kerasseq demo

Entry points: the `kerasseq` console script (`kerasseq_cli:main`),
`python -m kerasseq_cli` and `python -m kerasseq`.

Why a package of its own, beside `kerasseq`: `import kerasseq` registers
every serializable class with Keras (so `keras.models.load_model` finds
them), which imports TensorFlow, several seconds. This package is standard
library only, so `--help` and argument errors are answered before anything
heavy is imported (only a command that runs imports `kerasseq_cli.commands`).
`python -m kerasseq` runs the same `main`, after the package import.

The command line silences TensorFlow's native logging (`TF_CPP_MIN_LOG_LEVEL=3`
and, for the lines TensorFlow 2.21 prints regardless, `quiet_native_logs`)
unless the user set `TF_CPP_MIN_LOG_LEVEL`, so `kerasseq translate` prints
the translations and nothing else.

Every command exits with 0 on success, 2 on bad arguments or unusable inputs
(a one-line message on stderr), 1 on other failures.
"""

import argparse
import contextlib
import importlib
import math
import os
import sys


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


def first_line(error):
    """The first non-blank line of an exception's message (or its type name):
    how the command line reports an error, on one line."""
    for line in str(error).splitlines():
        if line.strip():
            return line.strip()
    return type(error).__name__


# ------------------------------------------------------------------- parser
class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that ends an option's text with `(default: VALUE)`.

    Only where there is a value to show and the text does not already state
    its default in parentheses: an option whose default is `None` (decided later,
    the help says how), a boolean switch and a positional argument are left
    as written.
    """

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if (not action.option_strings or default is None or default is argparse.SUPPRESS
                or isinstance(default, bool) or "(default" in text or "default)" in text):
            return action.help
        return f"{text} (default: %(default)s)".lstrip()


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse with a one-line error instead of the usage block.

    `error()` prints `kerasseq: error: MESSAGE (see kerasseq COMMAND --help)`
    on stderr and exits with 2. Subcommand parsers are of the same class
    (`add_subparsers(parser_class=...)`), and unrecognized arguments are
    reported by the parser of the command they were given to. Help shows
    the defaults (`DefaultsHelpFormatter`).
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)
        self.command_parsers = {}  # filled by make_parser: {name: subparser}

    def error(self, message):
        message = " ".join(line.strip() for line in message.splitlines())
        self.exit(2, f"kerasseq: error: {message} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(namespace, "command", None)
            self.command_parsers.get(command, self).error(
                f"unrecognized arguments: {' '.join(extras)}")
        return namespace


def _bounded(convert, inside, expected):
    """An argparse type: `convert(text)` if `inside(value)`, else "expected EXPECTED, got TEXT"."""

    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not inside(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


_positive_int = _bounded(int, lambda value: value >= 1, "a positive integer")
_beam_size = _bounded(int, lambda value: value >= 1, "a positive integer (1 = greedy)")
_non_negative_int = _bounded(int, lambda value: value >= 0, "an integer >= 0")
_fraction = _bounded(float, lambda value: 0.0 <= value <= 1.0, "a number in [0, 1]")


def _epoch_and_batch(text):
    """`EPOCH:BATCH` (two integers >= 0) as a tuple of ints."""
    parts = text.split(":")
    if len(parts) == 2 and all(part.strip().isdigit() for part in parts):
        return tuple(int(part) for part in parts)
    raise ValueError(text)


_epoch_batch = _bounded(_epoch_and_batch, lambda value: True, "EPOCH:BATCH (integers >= 0)")


def _finite_float(minimum=None, maximum=None, open_minimum=False, open_maximum=False):
    """An argparse type: a finite float within the bounds (NaN and inf refused)."""
    low = "(" if open_minimum else "["
    high = ")" if open_maximum or maximum is None else "]"  # inf is never inside
    interval = (f"{low}{'-inf' if minimum is None else f'{minimum:g}'}, "
                f"{'inf' if maximum is None else f'{maximum:g}'}{high}")

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number in {interval}, got {text!r}") from None
        inside = math.isfinite(value)
        if inside and minimum is not None:
            inside = value > minimum if open_minimum else value >= minimum
        if inside and maximum is not None:
            inside = value < maximum if open_maximum else value <= maximum
        if not inside:
            raise argparse.ArgumentTypeError(f"expected a finite number in {interval}, got {text!r}")
        return value

    return parse


def _add_on_bad_line(parser):
    parser.add_argument("--on-bad-line", choices=["error", "skip"], default="error",
                        help="a tsv:PATH line with too few columns or invalid UTF-8: stop with "
                        "the file and line number (error, default) or skip it")


def _add_model_arguments(parser, epochs, max_train, evaluate_words):
    parser.add_argument("--dataset", default="cmudict",
                        help="cmudict (default), tsv:PATH, tfds:NAME (e.g. tfds:ted_hrlr_translate/pt_to_en) "
                             "or sword[:SOURCE_MODULE:TARGET_MODULE] (two installed SWORD Bibles)")
    _add_on_bad_line(parser)
    parser.add_argument("--tokenizer", default="default", choices=["default", "wordpiece"],
                        help="default: characters and phonemes for cmudict, words for tsv: and "
                        "tfds:; wordpiece: WordPiece subwords learned on the training split "
                        "(keras-hub; its exports need `import tensorflow_text` to load)")
    parser.add_argument("--vocabulary-size", type=_positive_int, default=None,
                        help="most ids per side, the 4 reserved ones included (default: 8000 "
                        "with --tokenizer wordpiece, every token seen otherwise)")
    parser.add_argument("--model", default="rnn", choices=["rnn", "transformer"],
                        help="the architecture")
    parser.add_argument("--attention", default="bahdanau",
                        choices=["bahdanau", "luong", "luong_dot", "luong_concat", "none"],
                        help="rnn: the decoder's attention over the encoder outputs")
    parser.add_argument("--embedding-dim", type=_positive_int, default=64,
                        help="rnn: token embedding width")
    parser.add_argument("--units", type=_positive_int, default=128,
                        help="rnn: recurrent units per layer")
    parser.add_argument("--encoder-layers", type=_positive_int, default=1,
                        help="rnn: LSTM encoder layers")
    parser.add_argument("--num-layers", type=_positive_int, default=2,
                        help="transformer: encoder and decoder blocks")
    parser.add_argument("--d-model", type=_positive_int, default=128, help="transformer: model width")
    parser.add_argument("--num-heads", type=_positive_int, default=4, help="transformer: attention heads")
    parser.add_argument("--dff", type=_positive_int, default=512, help="transformer: feed-forward width")
    parser.add_argument("--warmup-steps", type=_positive_int, default=None,
                        help="use the Transformer warm-up schedule (d_model^-0.5 scaling) "
                             "instead of --learning-rate")
    parser.add_argument("--dropout", type=_finite_float(0.0, 1.0, open_maximum=True), default=0.0,
                        help="dropout rate, in [0, 1)")
    parser.add_argument("--max-target-length", type=_positive_int, default=32,
                        help="most target tokens a search generates by default")
    parser.add_argument("--max-positions", type=_positive_int, default=None,
                        help="transformer: rows of its position table, the longest source "
                             "and target it reads (default: --max-target-length)")
    parser.add_argument("--epochs", type=_positive_int, default=epochs,
                        help="training epochs (a rerun with a larger value continues a finished run)")
    parser.add_argument("--batch-size", type=_positive_int, default=None,
                        help="examples per batch, the global batch over every replica; "
                             "with --batch-tokens, the most rows of a training batch "
                             "(default: 64; with --batch-tokens: no limit)")
    parser.add_argument("--batch-tokens", type=_positive_int, default=None,
                        help="training batches by token count: each length bucket's batches "
                             "hold about this many tokens, padding included (fairseq's "
                             "--max-tokens), short pairs many to a batch and long ones few; "
                             "one machine only")
    parser.add_argument("--learning-rate", type=_finite_float(0.0, open_minimum=True), default=2e-3,
                        help="Adam's learning rate (unless --warmup-steps)")
    parser.add_argument("--clipnorm", type=_finite_float(0.0, open_minimum=True), default=1.0,
                        help="largest gradient norm (larger gradients are scaled down to it)")
    parser.add_argument("--label-smoothing", type=_finite_float(0.0, 1.0, open_maximum=True), default=0.0,
                        help="label smoothing of the loss, in [0, 1)")
    parser.add_argument("--max-train-examples", type=_positive_int, default=max_train,
                        help="training pairs read, at most (not given: every pair)")
    parser.add_argument("--max-dev-examples", type=_positive_int, default=None,
                        help="dev pairs read, at most (not given: every pair)")
    parser.add_argument("--evaluate-words", type=int, default=evaluate_words,
                        help="dev words decoded for WER/PER after training (0 = none)")
    parser.add_argument("--seed", type=int, default=0,
                        help="random seed of the weights and the shuffling")
    parser.add_argument("--verbose", type=int, default=2, choices=[0, 1, 2],
                        help="Keras' fit output: 0 none, 1 a progress bar, 2 one line per epoch")


OUTPUT_DIR_HELP = "the run directory (model.keras, history, summary, logs)"


def _add_run_arguments(parser, output_dir):
    """The options of a training run (`train`, `demo`): `output_dir` None makes it required."""
    if output_dir is None:
        parser.add_argument("--output-dir", required=True, help=OUTPUT_DIR_HELP)
    else:
        parser.add_argument("--output-dir", default=output_dir, help=OUTPUT_DIR_HELP)
    parser.add_argument("--overwrite", action="store_true",
                        help="start over: delete this run's model, backup, history and "
                        "summary in --output-dir first (by default a rerun resumes an "
                        "interrupted run, continues a finished one with a larger "
                        "--epochs, or does nothing)")
    parser.add_argument("--keep-checkpoints", type=_positive_int, default=None, metavar="N",
                        help="also save the model of every epoch as OUTPUT_DIR/checkpoints/"
                        "epoch_XXX.keras and keep the last N, for `kerasseq average`")
    parser.add_argument("--strategy", default="default",
                        choices=["default", "mirrored", "multi_worker"],
                        help="tf.distribute strategy: default (one device), mirrored (all "
                        "local GPUs) or multi_worker (one process per worker, cluster from "
                        "TF_CONFIG; run the same command on every worker; see "
                        "docs/distributed.md)")
    parser.add_argument("--collective-timeout", type=_finite_float(0.0, open_minimum=True),
                        default=None, metavar="SECONDS",
                        help="multi_worker: end the run with an error when an all-reduce "
                        "waits longer than this for the other workers, e.g. a stuck one "
                        "(default: no timeout; a worker process that dies is noticed "
                        "anyway, by its heartbeats). TensorFlow starts a thread per "
                        "collective to time it: a debugging aid more than a default")
    parser.add_argument("--no-tensorboard", dest="tensorboard", action="store_false",
                        help="do not write TensorBoard logs to OUTPUT_DIR/tensorboard")
    parser.add_argument("--tensorboard-sources", type=_non_negative_int, default=200,
                        metavar="N", help="dev sources translated (greedy) after every "
                        "epoch for the TensorBoard dev score and attention image "
                        "(default 200; 0: none)")
    # Testing aid (tests/test_resume.py), hidden from --help: sleep SECONDS after
    # every training batch and report it on stderr, to interrupt mid-epoch.
    parser.add_argument("--slow-batches", type=_finite_float(0.0), default=0.0,
                        help=argparse.SUPPRESS)
    # Testing aid (tests/test_resume.py, tests/training/test_multi_worker.py), hidden
    # from --help: after batch BATCH of epoch EPOCH (0-based, as the debug lines of
    # --slow-batches count them) report that batch on stderr and stop the process
    # (SIGSTOP), so that a test can kill it at exactly that point however slow the
    # machine is (a sleep leaves a loaded machine's test too little time to kill it).
    parser.add_argument("--stop-after-batch", type=_epoch_batch, default=None,
                        metavar="EPOCH:BATCH", help=argparse.SUPPRESS)


def _add_alignment_arguments(parser, help_text):
    """--alignments, --alignment-layer, --alignment-head (translate and export)."""
    parser.add_argument("--alignments", action="store_true", help=help_text)
    parser.add_argument(
        "--alignment-layer", default=None, metavar="INDEX|mean",
        help="Transformer decoder layer whose cross-attention aligns (default: the "
             "model's: its guided head if it was trained with guided alignment, else the "
             "mean over every layer and head)")
    parser.add_argument(
        "--alignment-head", default=None, metavar="INDEX|mean",
        help="attention head that aligns (default: the model's, as --alignment-layer)")


def _add_search_arguments(parser, export=False, nbest=True):
    # Each search flag's own range is checked here, before TensorFlow is
    # imported (`kerasseq --beam 0` is refused at once); what depends on
    # several flags (--nbest <= --beam) is checked by kerasseq.SearchConfig,
    # the validator of the Python API (the commands name the flag).
    parser.add_argument("--beam", type=_beam_size, default=None,
                        help="beam size (default 4, as everywhere in kerasseq; 1 = greedy)")
    if nbest:
        parser.add_argument("--nbest", type=_positive_int, default=None,
                            help="hypotheses per text" + (" in translate_nbest (default: --beam)"
                                                          if export else " (default 1)"))
    else:  # evaluate scores one translation per text
        parser.set_defaults(nbest=None)
    parser.add_argument("--length-penalty", type=_finite_float(0.0), default=None,
                        help="GNMT length penalty alpha >= 0 (default 0)")
    parser.add_argument("--no-repeat-ngram-size", type=_non_negative_int, default=None,
                        metavar="N",
                        help="no N-gram of tokens twice in an output, as fairseq's flag "
                             "(default 0: off)")
    parser.add_argument("--ban-unk", action="store_true", default=None,
                        help="never output [UNK] (default: allowed; [PAD] and [START] never are)")
    parser.add_argument("--jit", choices=["auto", "on", "off"], default="auto",
                        help="XLA-compile the encoder and the search (default auto: on a GPU, off on a CPU)")


def version():
    """kerasseq's installed version (`importlib.metadata`), or "unknown" when the
    package is imported from a source tree that was never installed."""
    from importlib import metadata

    try:
        return metadata.version("kerasseq")
    except metadata.PackageNotFoundError:
        return "unknown"


MODEL_HELP = ("a model: a .keras file or a training run directory (its model.keras); "
              "several, comma-separated (a.keras,b.keras), are decoded as one ensemble "
              "(kerasseq.models.Ensemble)")


def make_parser():
    parser = OneLineErrorParser(
        prog="kerasseq", description="kerasseq: train, translate, evaluate, export, average, demo.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    parser.command_parsers = commands.choices

    train_parser = commands.add_parser("train", help="train a model")
    _add_model_arguments(train_parser, epochs=10, max_train=None, evaluate_words=2000)
    _add_run_arguments(train_parser, output_dir=None)
    train_parser.set_defaults(handler="command_train")

    translate_parser = commands.add_parser("translate", help="translate texts")
    translate_parser.add_argument("model_dir", help=MODEL_HELP + ", or a SavedModel or "
                                  "CTranslate2 directory written by `kerasseq export`")
    translate_parser.add_argument("texts", nargs="*",
                                  help="texts to translate; none given: the lines of standard "
                                  "input, one output line per input line. Read as UTF-8: "
                                  "invalid bytes become U+FFFD (an unknown character), as in "
                                  "an export")
    _add_search_arguments(translate_parser)
    _add_alignment_arguments(
        translate_parser,
        "also print each translation's word alignment from the attention, as "
        "'source-target' word indices (i-j), after a tab (.keras models with attention, "
        "or an export made with --alignments)")
    translate_parser.set_defaults(handler="command_translate")

    evaluate_parser = commands.add_parser("evaluate", help="WER/PER on a split")
    evaluate_parser.add_argument("model_dir", help=MODEL_HELP)
    evaluate_parser.add_argument("--dataset", default="cmudict",
                                 help="the data, as in `kerasseq train --dataset`")
    _add_on_bad_line(evaluate_parser)
    evaluate_parser.add_argument("--split", default="dev", choices=["train", "dev", "test"],
                                 help="the split scored")
    evaluate_parser.add_argument("--limit", type=_positive_int, default=None,
                                 help="pairs scored, at most (not given: the whole split)")
    evaluate_parser.add_argument("--max-unknown-rate", type=_fraction, default=0.5,
                                 help="largest fraction of source tokens outside the model's "
                                 "vocabulary (default 0.5); above it the dataset is refused")
    _add_search_arguments(evaluate_parser, nbest=False)
    evaluate_parser.set_defaults(handler="command_evaluate")

    export_parser = commands.add_parser(
        "export", help="export a model as a text-to-text SavedModel or a CTranslate2 model")
    export_parser.add_argument("model_dir", help=MODEL_HELP)
    export_parser.add_argument("export_dir")
    export_parser.add_argument(
        "--format", choices=["saved_model", "ctranslate2"], default="saved_model",
        help="saved_model (default): a TensorFlow SavedModel with the search built in; "
             "ctranslate2: a CTranslate2 model directory of a Transformer (pip install "
             "'kerasseq[ctranslate2]'; search settings are given when translating)")
    export_parser.add_argument(
        "--quantization", default=None,
        choices=["int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16",
                 "bfloat16", "float32"],
        help="--format ctranslate2: the weight type (default: float32 as trained)")
    _add_search_arguments(export_parser, export=True)
    export_parser.add_argument("--max-length", type=_positive_int, default=None,
                               help="most target tokens (default: the model's max_target_length)")
    export_parser.add_argument("--max-source-length", type=_positive_int, default=None,
                               help="source tokens kept per text (default: tokenizer max_length or 256)")
    export_parser.add_argument("--overwrite", action="store_true",
                               help="replace an existing export (a SavedModel directory) or "
                                    "empty directory at EXPORT_DIR; nothing else is replaced")
    _add_alignment_arguments(
        export_parser,
        "also write the signature translate_alignments (text -> translation, score, "
        "alignment: 'source-target' word indices, i-j) from the model's attention")
    export_parser.set_defaults(handler="command_export")

    average_parser = commands.add_parser(
        "average", help="average the weights of checkpoints of one run into one model")
    average_parser.add_argument("output", help="the averaged model, a .keras file")
    average_parser.add_argument("checkpoints", nargs="+",
                                help=".keras checkpoints of one architecture, or a run directory "
                                "(its checkpoints/epoch_XXX.keras from --keep-checkpoints)")
    average_parser.add_argument("--last", type=_positive_int, default=None, metavar="N",
                                help="average only the last N of the checkpoints given")
    average_parser.add_argument("--overwrite", action="store_true",
                                help="replace an existing OUTPUT file")
    average_parser.set_defaults(handler="command_average")

    demo_parser = commands.add_parser("demo", help="train a small G2P model and translate")
    _add_model_arguments(demo_parser, epochs=5, max_train=10000, evaluate_words=500)
    _add_run_arguments(demo_parser, output_dir="runs/demo")
    demo_parser.set_defaults(handler="command_demo")
    return parser


@contextlib.contextmanager
def quiet_native_logs():
    """Drop what native code writes to file descriptor 2; keep Python's `sys.stderr`.

    TensorFlow 2.21 writes its start-up lines (oneDNN, CUDA probing, absl's
    "All log messages before absl::InitializeLog()") straight to descriptor 2,
    whatever `TF_CPP_MIN_LOG_LEVEL` says. For the duration of a command,
    descriptor 2 points to /dev/null and `sys.stderr` to a copy of the real
    stderr, so errors, warnings and progress from Python still show. Used
    only when the user did not set `TF_CPP_MIN_LOG_LEVEL` (set it, e.g. to 0,
    to see TensorFlow's logs). Restored on exit.
    """
    try:
        sys.stderr.flush()
        saved_fd = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no real descriptor 2
        yield
        return
    saved_stream = sys.stderr
    python_stderr = os.fdopen(os.dup(saved_fd), "w", buffering=1,
                              encoding=getattr(saved_stream, "encoding", None) or "utf-8",
                              errors="backslashreplace")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    sys.stderr = python_stderr
    try:
        yield
    finally:
        python_stderr.flush()
        sys.stderr = saved_stream
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        python_stderr.close()


def main(argv=None):
    args = make_parser().parse_args(argv)
    quiet = "TF_CPP_MIN_LOG_LEVEL" not in os.environ
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TensorFlow is imported
    with quiet_native_logs() if quiet else contextlib.nullcontext():
        try:
            commands = importlib.import_module("kerasseq_cli.commands")  # imports TensorFlow
            getattr(commands, args.handler)(args)
        except CLIError as error:
            print(f"kerasseq {args.command}: error: {error}", file=sys.stderr)
            return 2
        except (ValueError, FileNotFoundError) as error:
            print(f"kerasseq {args.command}: error: {first_line(error)}", file=sys.stderr)
            return 2
    return 0

