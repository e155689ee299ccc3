"""The command line end to end, through subprocesses: exit codes and outputs."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import keras
import pytest
import tensorflow as tf

from tests import processes
from tests.models.g2p_fixture import made_once

TINY = ["--max-train-examples", "40", "--max-dev-examples", "20", "--evaluate-words", "10",
        "--embedding-dim", "8", "--units", "16", "--batch-size", "16", "--verbose", "0"]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
WORDS = ["cat", "dog"]

# Lines that TensorFlow and absl write to stderr on their own (C++ logs in
# glog format, absl's start-up notice, Python loggers): not the CLI's message.
LOG_LINE = re.compile(
    r"[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] "
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|(WARNING|INFO|ERROR):(absl|tensorflow):"
)


def start(*args, stdin=False):
    return processes.popen([sys.executable, "-m", "kerasseq_cli", *args], text=True, env=ENV,
                            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(process, input=None, timeout=600):
    stdout, stderr = process.communicate(input, timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def kerasseq(*args, input=None, timeout=600):
    return finish(start(*args, stdin=input is not None), input, timeout)


def kerasseq_all(*commands):
    """Run independent commands side by side (each one imports TensorFlow)."""
    processes = [start(*command) for command in commands]
    return [finish(process) for process in processes]


def one_line_error(result):
    """The single line left on stderr once TensorFlow's own log lines are dropped."""
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    lines = [line for line in result.stderr.splitlines()
             if line.strip() and not LOG_LINE.match(line)]
    assert len(lines) == 1, result.stderr[-3000:]
    return lines[0]


def main_error(capsys, *args):
    """`kerasseq_cli.main(args)` in this process: exit status 2 and one line on
    stderr (what the console script prints once TensorFlow's log lines are
    dropped; a process of its own costs a TensorFlow import)."""
    from kerasseq_cli import main

    capsys.readouterr()
    assert main(list(args)) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1, captured.err
    return captured.err.rstrip("\n")


def translations(stdout):
    """`{source: translation}` from the `source<TAB>translation` lines of translate."""
    return dict(line.split("\t") for line in stdout.splitlines())


def trained_run():
    """The run directory of `kerasseq train` (2 epochs of TINY), trained once per
    session and read (never changed) by the tests of several files."""
    def train(output):
        # A large learning rate, so that two epochs give non-empty translations.
        result = kerasseq("train", "--epochs", "2", "--learning-rate", "1e-2", "--output-dir",
                          output, *TINY)
        assert result.returncode == 0, result.stderr[-2000:]

    return made_once("cli_run", train)


@pytest.fixture(scope="module")
def trained_dir():
    return trained_run()


@pytest.fixture(scope="module")
def trained_model(trained_dir):
    import kerasseq.models  # noqa: F401  (registers the classes)

    return keras.models.load_model(os.path.join(trained_dir, "model.keras"))


@pytest.fixture(scope="module")
def beam2_export(trained_dir, tmp_path_factory):
    """`kerasseq export --beam 2` of the trained run (no alignments)."""
    export_dir = str(tmp_path_factory.mktemp("cli_export") / "export")
    result = kerasseq("export", trained_dir, export_dir, "--beam", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    return export_dir


@pytest.fixture(scope="module")
def direct_alignments(trained_dir):
    """`kerasseq translate --beam 2 --alignments --alignment-head mean` of the trained run."""
    result = kerasseq("translate", trained_dir, *WORDS, "--beam", "2", "--alignments",
                      "--alignment-head", "mean")
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def test_train_writes_model_history_and_summary(trained_dir):
    assert os.path.exists(os.path.join(trained_dir, "model.keras"))
    with open(os.path.join(trained_dir, "summary.json")) as handle:
        summary = json.load(handle)
    assert summary["epochs"] == 2 and len(summary["history"]["loss"]) == 2
    assert 0.0 <= summary["dev"]["wer"] <= 1.0 and summary["dev"]["words"] == 10
    with open(os.path.join(trained_dir, "history.csv")) as handle:
        assert len(handle.read().strip().splitlines()) == 3  # header + 2 epochs
    assert not any(name.endswith(".tmp") or ".tmp-" in name for name in os.listdir(trained_dir))


def test_translate_arguments_and_stdin(trained_dir, trained_model):
    capitals = [word.upper() for word in WORDS]  # CMUdict models are case-insensitive
    arguments = start("translate", trained_dir, *WORDS, *capitals)
    piped = start("translate", trained_dir, "--beam", "3", "--nbest", "2", stdin=True)
    result = finish(arguments)
    assert result.returncode == 0, result.stderr[-2000:]
    default = trained_model.translate(WORDS)  # beam 4, as the CLI's default
    assert any(default), "the fixture model should produce some phonemes"
    assert result.stdout.splitlines() == [f"{word}\t{text}" for word, text
                                          in zip(WORDS + capitals, default * 2, strict=True)]
    result = finish(piped, input="cat\n\ndog\n")
    assert result.returncode == 0, result.stderr[-2000:]
    nbest = trained_model.translate(WORDS, method="beam", num_beams=3, num_return=2,
                                    length_penalty=0.0)
    expected = [f"{word}\t{' | '.join(texts)}" for word, texts in zip(WORDS, nbest, strict=True)]
    # The blank line translates to "" (the one rule for blank texts): outputs stay aligned.
    assert result.stdout.splitlines() == [expected[0], "\t | ", expected[1]]
    assert all(len(texts) == 2 for texts in nbest)


def test_export_then_translate_equals_translate_with_the_same_beam(trained_dir, trained_model,
                                                                   beam2_export):
    export_dir = beam2_export
    direct, direct_nbest = kerasseq_all(
        ("translate", trained_dir, *WORDS, "--beam", "2"),
        ("translate", trained_dir, *WORDS, "--beam", "2", "--nbest", "2"),
    )
    for result in (direct, direct_nbest):
        assert result.returncode == 0, result.stderr[-2000:]
    served, served_nbest = kerasseq_all(("translate", export_dir, *WORDS),
                                        ("translate", export_dir, *WORDS, "--nbest", "2"))
    for result in (served, served_nbest):
        assert result.returncode == 0, result.stderr[-2000:]
    assert served.stdout == direct.stdout
    assert served_nbest.stdout == direct_nbest.stdout
    best = trained_model.translate(WORDS, method="beam", num_beams=2)
    nbest = trained_model.translate(WORDS, method="beam", num_beams=2, num_return=2)
    assert translations(served.stdout) == dict(zip(WORDS, best, strict=True))
    assert translations(served_nbest.stdout) == {
        word: " | ".join(texts) for word, texts in zip(WORDS, nbest, strict=True)}
    assert all(texts[1] for texts in nbest), "the second-best hypotheses are never empty"


def test_invalid_utf8_on_stdin_becomes_u_fffd_as_in_an_export(trained_dir, trained_model,
                                                              beam2_export):
    """A line of stdin (or an argument) that is not UTF-8 is translated with its bad
    bytes as U+FFFD by `kerasseq translate` on a .keras model and on an export
    alike, one output line per input line (before: "texts are not strings")."""
    sources = ["cat", "caf\ufffd", "dog\ufffd\ufffdx"]
    data = b"cat\ncaf\xe9\ndog\xff\xfex\n"
    runs = [processes.popen([sys.executable, "-m", "kerasseq_cli", "translate", path,
                             "--beam", "2"], env=ENV, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for path in (trained_dir, beam2_export)]
    direct, served = (run.communicate(data, timeout=600) for run in runs)
    for process, (_, stderr) in zip(runs, (direct, served), strict=True):
        assert process.returncode == 0, stderr[-2000:]
    assert direct[0] == served[0]
    lines = direct[0].decode("utf-8").splitlines()
    expected = trained_model.translate(sources, method="beam", num_beams=2)
    assert lines == [f"{source}\t{text}" for source, text in zip(sources, expected, strict=True)]
    # an argument with the same bytes (kept by Python as lone surrogates): the same rule
    argument = kerasseq("translate", trained_dir, b"caf\xe9".decode("utf-8", "surrogateescape"),
                        "--beam", "2")
    assert argument.returncode == 0, argument.stderr[-2000:]
    assert argument.stdout == f"{lines[1]}\n"


def test_export_refuses_to_replace_a_model_file(trained_dir, tmp_path):
    """`kerasseq export RUN RUN/model.keras --overwrite` keeps the trained model."""
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(os.path.join(trained_dir, "model.keras"), run / "model.keras")
    before = (run / "model.keras").read_bytes()
    result = kerasseq("export", str(run), str(run / "model.keras"), "--overwrite")
    line = one_line_error(result)
    assert line.startswith("kerasseq export: error: "), line
    assert repr(str(run / "model.keras")) in line and "a .keras model" in line, line
    assert "SavedModel directory" in line, line
    assert (run / "model.keras").read_bytes() == before
    assert os.listdir(run) == ["model.keras"]  # no .model.keras.tmp-* left behind


def test_evaluate_prints_rates(trained_dir):
    """stdout is one JSON object (`kerasseq evaluate ... > out.json`); the progress bar
    is on stderr."""
    result = kerasseq("evaluate", trained_dir, "--split", "dev", "--limit", "15")
    assert result.returncode == 0, result.stderr[-2000:]
    rates = json.loads(result.stdout)
    assert rates["split"] == "dev" and rates["words"] == 15 and 0 <= rates["wer"] <= 1
    assert "15/15" in result.stderr  # Keras' progress bar over the 15 words


def test_evaluate_refuses_a_dataset_with_another_vocabulary(trained_dir, tmp_path):
    greek = "αβγδεζηθικλμνξοπρστυφχψω"
    pairs = tmp_path / "greek.tsv"
    pairs.write_text("".join(f"{greek[i % 24]}{greek[7 * i % 24]}{greek[5 * i % 24]}\tA B\n"
                             for i in range(40)), encoding="utf-8")
    dataset = f"tsv:{pairs}"
    refused, allowed = kerasseq_all(
        ("evaluate", trained_dir, "--dataset", dataset, "--split", "dev"),
        ("evaluate", trained_dir, "--dataset", dataset, "--split", "dev",
         "--max-unknown-rate", "1"),
    )
    message = one_line_error(refused)
    assert message.startswith("kerasseq evaluate: error: ")
    assert "does not match the model's" in message and "100.0%" in message
    assert "(6 of 6, split dev)" in message  # 2 dev lines of 3 characters
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    assert json.loads(allowed.stdout.strip().splitlines()[-1])["sentences"] == 2


def test_unknown_token_rate():
    from kerasseq.data import TextTokenizer
    from kerasseq_cli.commands import unknown_token_rate

    tokenizer = TextTokenizer.from_texts(["abc"], split="character")
    assert unknown_token_rate(tokenizer, ["abx", "αβ", "c"]) == (3, 6)
    assert unknown_token_rate(tokenizer, []) == (0, 0)


def test_demo_smoke(tmp_path):
    output = tmp_path / "demo"
    result = kerasseq("demo", "--output-dir", str(output), "--epochs", "1",
                      "--max-train-examples", "16", "--max-dev-examples", "8",
                      "--evaluate-words", "0", "--embedding-dim", "4", "--units", "4",
                      "--batch-size", "16", "--verbose", "0")
    assert result.returncode == 0, result.stderr[-2000:]
    assert ("training an LSTM encoder + bahdanau attention + GRU decoder on 16 examples of "
            "cmudict for 1 epochs") in result.stdout
    printed = [line.split("->")[0].strip() for line in result.stdout.splitlines() if "->" in line]
    assert printed == ["hello", "world", "keras", "sequence", "attention", "translation",
                       "kerasseq"]
    assert os.path.isfile(output / "model.keras") and os.path.isfile(output / "summary.json")
    # The first command a newcomer runs prints no Keras/TensorFlow warning
    # (TensorFlow's one native start-up line aside, which the CLI cannot reach).
    warnings = [line for line in (result.stdout + result.stderr).splitlines()
                if "warn" in line.lower() and "before absl::InitializeLog" not in line]
    assert not warnings, warnings


@pytest.mark.parametrize("args, message", [
    (["translate", "/nonexistent/model", "cat"], "no kerasseq model"),
    (["train", "--dataset", "tsv:/nonexistent.tsv", "--output-dir", "/tmp/x"], "no such file"),
    (["train", "--dataset", "wmt", "--output-dir", "/tmp/x"], "dataset must be 'cmudict', 'tsv:PATH', 'tfds:NAME' or 'sword[:SOURCE:TARGET]'"),
    (["evaluate", "/nonexistent/model"], "no kerasseq model"),
])
def test_bad_arguments_exit_2_with_one_line(args, message, capsys):
    line = main_error(capsys, *args)
    assert line.startswith(f"kerasseq {args[0]}: error: ") and message in line


@pytest.mark.parametrize("extra, message", [
    (["--max-positions", "16"], "--max-positions applies to --model transformer"),
    (["--model", "transformer", "--max-positions", "8", "--max-target-length", "12"],
     "--max-target-length 12 must be <= --max-positions 8"),
])
def test_position_table_flags_are_checked(extra, message, capsys, tmp_path):
    line = main_error(capsys, "train", "--output-dir", str(tmp_path / "run"), "--epochs", "1",
                      "--max-train-examples", "16", "--max-dev-examples", "4", *extra)
    assert line.startswith("kerasseq train: error: ") and message in line, line


ARGPARSE_ERRORS = [
    (["train"], "the following arguments are required: --output-dir", "kerasseq train"),
    (["train", "--epochs", "0", "--output-dir", "/tmp/x"],
     "argument --epochs: expected a positive integer, got '0'", "kerasseq train"),
    (["translate", "/tmp/x", "cat", "--bogus"], "unrecognized arguments: --bogus",
     "kerasseq translate"),
    (["evaluate", "/tmp/x", "--max-unknown-rate", "2"],
     "argument --max-unknown-rate: expected a number in [0, 1], got '2'", "kerasseq evaluate"),
    (["train", "--learning-rate", "nan", "--output-dir", "/tmp/x"],
     "argument --learning-rate: expected a finite number in (0, inf), got 'nan'", "kerasseq train"),
    (["train", "--clipnorm", "inf", "--output-dir", "/tmp/x"],
     "argument --clipnorm: expected a finite number in (0, inf), got 'inf'", "kerasseq train"),
    (["train", "--label-smoothing", "1", "--output-dir", "/tmp/x"],
     "argument --label-smoothing: expected a finite number in [0, 1), got '1'", "kerasseq train"),
    (["translate", "/tmp/x", "cat", "--beam", "two"],
     "argument --beam: expected a positive integer (1 = greedy), got 'two'", "kerasseq translate"),
    (["evaluate", "/tmp/x", "--nbest", "2"], "unrecognized arguments: --nbest 2",
     "kerasseq evaluate"),  # evaluate scores one translation per text
    (["frobnicate"], "argument command: invalid choice: 'frobnicate'", "kerasseq"),
    ([], "the following arguments are required: command", "kerasseq"),
]


@pytest.mark.parametrize("args, message, prog", ARGPARSE_ERRORS,
                         ids=[" ".join(args) or "no-command" for args, _, _ in ARGPARSE_ERRORS])
def test_argparse_error_is_one_line(args, message, prog, capsys):
    from kerasseq_cli import main

    with pytest.raises(SystemExit) as raised:
        main(args)
    assert raised.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"kerasseq: error: {message}")
    assert captured.err.endswith(f" (see {prog} --help)\n")


SEARCH_ERRORS = [
    (["translate", "/tmp/x", "cat", "--beam", "2", "--nbest", "3"],
     "--nbest: num_return must be <= num_beams=2. Received: num_return=3"),
    (["translate", "/tmp/x", "cat", "--beam", "1", "--nbest", "2"],
     "--nbest 2 needs --beam N with N >= 2 (--beam 1 is greedy search)"),
]

# Each search flag's own range: refused by the parser, before TensorFlow is imported.
SEARCH_RANGE_ERRORS = [
    (["translate", "/tmp/x", "cat", "--length-penalty", "-1"],
     "argument --length-penalty: expected a finite number in [0, inf), got '-1'"),
    (["translate", "/tmp/x", "cat", "--length-penalty", "nan"],
     "argument --length-penalty: expected a finite number in [0, inf), got 'nan'"),
    (["translate", "/tmp/x", "cat", "--beam", "0"],
     "argument --beam: expected a positive integer (1 = greedy), got '0'"),
    (["translate", "/tmp/x", "cat", "--no-repeat-ngram-size", "-1"],
     "argument --no-repeat-ngram-size: expected an integer >= 0, got '-1'"),
    (["translate", "/tmp/x", "cat", "--nbest", "0"],
     "argument --nbest: expected a positive integer, got '0'"),
    (["export", "/tmp/x", "/tmp/kerasseq-never-written", "--max-length", "0"],
     "argument --max-length: expected a positive integer, got '0'"),
    (["export", "/tmp/x", "/tmp/kerasseq-never-written", "--max-source-length", "-3"],
     "argument --max-source-length: expected a positive integer, got '-3'"),
]


def test_search_flag_ranges_are_refused_before_tensorflow_is_imported():
    """`kerasseq translate M --beam 0` and the other out-of-range search flags:
    exit 2 with one line, and neither TensorFlow nor kerasseq was imported (the
    refusal does not wait for the seconds of a TensorFlow import)."""
    code = ("import contextlib, io, json, sys, kerasseq_cli\n"
            "out = []\n"
            "for argv in json.loads(sys.argv[1]):\n"
            "    err = io.StringIO()\n"
            "    try:\n"
            "        with contextlib.redirect_stderr(err):\n"
            "            kerasseq_cli.main(argv)\n"
            "    except SystemExit as done:\n"
            "        out.append([done.code, err.getvalue()])\n"
            "    else:\n"
            "        out.append([None, err.getvalue()])\n"
            "heavy = sorted(m for m in sys.modules\n"
            "               if m.split('.')[0] in ('tensorflow', 'keras', 'kerasseq'))\n"
            "print(json.dumps({'results': out, 'heavy': heavy}))\n")
    argvs = [args for args, _ in SEARCH_RANGE_ERRORS]
    result = subprocess.run([sys.executable, "-c", code, json.dumps(argvs)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["heavy"] == []
    for (args, message), (code, err) in zip(SEARCH_RANGE_ERRORS, report["results"], strict=True):
        assert code == 2, (args, err)
        assert err == f"kerasseq: error: {message} (see kerasseq {args[0]} --help)\n", err


def test_version_is_the_installed_distributions():
    from importlib import metadata

    result = subprocess.run([sys.executable, "-m", "kerasseq_cli", "--version"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"kerasseq {metadata.version('kerasseq')}\n"


def test_help_shows_the_defaults():
    """Every option with a default value shows it in --help (train and demo differ)."""
    from kerasseq_cli import make_parser

    def options(command):  # {"--flag": its help text, on one line}
        blocks, text = {}, make_parser().command_parsers[command].format_help()
        for block in re.split(r"\n(?=  -)", text.split("\noptions:\n")[1]):
            flag = block.split()[0].rstrip(",")
            blocks[flag] = " ".join(block.split())
        return blocks

    train, demo, evaluate = options("train"), options("demo"), options("evaluate")
    assert train["--batch-size"].endswith("(default: 64; with --batch-tokens: no limit)")
    for flag, default in [("--epochs", "10"),
                          ("--learning-rate", "0.002"), ("--clipnorm", "1.0"),
                          ("--units", "128"), ("--embedding-dim", "64"), ("--model", "rnn"),
                          ("--attention", "bahdanau"), ("--seed", "0"), ("--dropout", "0.0"),
                          ("--verbose", "2"), ("--max-target-length", "32"),
                          ("--label-smoothing", "0.0"), ("--evaluate-words", "2000")]:
        assert train[flag].endswith(f"(default: {default})"), train[flag]
    assert demo["--epochs"].endswith("(default: 5)") and train["--epochs"].endswith("(default: 10)")
    assert demo["--output-dir"].endswith("(default: runs/demo)")
    assert demo["--max-train-examples"].endswith("(default: 10000)")
    assert evaluate["--split"].endswith("(default: dev)")
    # None (decided later, said in words) and switches show no value; a default
    # already stated in parentheses is not repeated
    assert "(default: None)" not in " ".join(train.values())
    assert "default: False" not in train["--overwrite"]
    assert "cmudict (default), tsv:PATH" in train["--dataset"]
    assert "(default: cmudict)" not in train["--dataset"]


@pytest.mark.parametrize("args, message", SEARCH_ERRORS,
                         ids=[" ".join(args[3:]) for args, _ in SEARCH_ERRORS])
def test_search_settings_are_checked_by_search_config(args, message, capsys):
    """What depends on several search flags is checked by `SearchConfig` (the
    validator of the Python API) before any model is loaded (/tmp/x does not
    exist), and the one-line error names the flag."""
    from kerasseq_cli import main

    assert main(args) == 2
    assert capsys.readouterr().err == f"kerasseq {args[0]}: error: {message}\n"


def test_argparse_errors_are_nonzero():
    """The same errors through the console entry point: exit 2, one line on stderr."""
    cases = [ARGPARSE_ERRORS[0], ARGPARSE_ERRORS[2]]
    results = kerasseq_all(*(args for args, _, _ in cases))
    for (args, message, prog), result in zip(cases, results, strict=True):
        line = one_line_error(result)
        assert line == f"kerasseq: error: {message} (see {prog} --help)", (args, line)
        assert not result.stdout


@keras.saving.register_keras_serializable(package="kerasseq_tests")
class Doubling(keras.layers.Layer):
    """A layer the `kerasseq` process has never heard of (registered only here)."""

    def call(self, inputs):
        return 2 * inputs


def test_not_a_kerasseq_model(tmp_path, capsys):
    """A broken file, a .keras file with an unknown class (a multi-line Keras
    error; in a process of its own, which never registered the class), and a
    valid Keras model that is not a kerasseq model."""
    directories = {name: tmp_path / name
                   for name in ("bogus", "truncated", "unknown_class", "plain_keras")}
    for directory in directories.values():
        directory.mkdir()
    (directories["bogus"] / "model.keras").write_text("not a zip file")
    custom = keras.Sequential([keras.Input((3,)), Doubling()])
    custom.save(directories["unknown_class"] / "model.keras")
    plain = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    plain.save(directories["plain_keras"] / "model.keras")
    whole = (directories["plain_keras"] / "model.keras").read_bytes()
    (directories["truncated"] / "model.keras").write_bytes(whole[:len(whole) // 2])
    lines = {name: main_error(capsys, "translate", str(directory), "cat")
             for name, directory in directories.items() if name != "unknown_class"}
    lines["unknown_class"] = one_line_error(
        kerasseq("translate", str(directories["unknown_class"]), "cat"))
    for name, line in lines.items():
        assert line.startswith("kerasseq translate: error: ") and name in line, line
    for name in ("bogus", "truncated"):  # corrupt, with the zip error (Keras: "File not found")
        path = str(directories[name] / "model.keras")
        assert lines[name] == (f"kerasseq translate: error: {path!r} is corrupt or unreadable: "
                               "a .keras file is a zip archive and this one cannot be opened "
                               "(File is not a zip file)"), lines[name]
    assert "not a loadable kerasseq model" in lines["unknown_class"]
    assert "is a Keras model but not a kerasseq seq2seq model" in lines["plain_keras"]


class Doubler(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def double(self, x):
        return {"y": 2 * x}


def test_foreign_saved_model_is_one_line_error(tmp_path, capsys):
    foreign = str(tmp_path / "foreign")
    module = Doubler()
    tf.saved_model.save(module, foreign, signatures=module.double.get_concrete_function())
    # Metadata copied from a real export does not make the signature right.
    disguised = str(tmp_path / "disguised")
    tf.saved_model.save(module, disguised, signatures=module.double.get_concrete_function())
    os.makedirs(os.path.join(disguised, "assets.extra"))
    with open(os.path.join(disguised, "assets.extra", "kerasseq_export.json"), "w") as handle:
        json.dump({"format": "kerasseq-translator", "num_beams": 1, "method": "greedy"}, handle)
    line = main_error(capsys, "translate", foreign, "cat")
    assert line.startswith("kerasseq translate: error: ")
    assert f"{foreign!r} is a SavedModel but not a kerasseq translator" in line
    line = main_error(capsys, "translate", disguised, "cat")
    assert f"{disguised!r}: the serving_default signature does not map" in line


def test_search_flags_must_match_the_export_length_penalty_0_included(tmp_path, capsys):
    """The search of an export is fixed: `--beam` and `--length-penalty` are
    compared with its metadata before the SavedModel loads, `--length-penalty
    0` too (it used to pass as "not given")."""
    export = tmp_path / "export"
    (export / "assets.extra").mkdir(parents=True)
    (export / "saved_model.pb").write_bytes(b"")  # reached only when the flags match
    (export / "assets.extra" / "kerasseq_export.json").write_text(json.dumps(
        {"format": "kerasseq-translator", "method": "beam", "num_beams": 4,
         "length_penalty": 0.6}))
    prefix = f"kerasseq translate: error: {str(export)!r} "
    assert main_error(capsys, "translate", str(export), "cat", "--length-penalty", "0") == (
        prefix + "was exported with length_penalty=0.6; re-export with --length-penalty 0.0")
    assert main_error(capsys, "translate", str(export), "cat", "--beam", "2").startswith(
        prefix + "was exported with num_beams=4")
    for flags in ([], ["--length-penalty", "0.6", "--beam", "4"]):  # as exported: on to the load
        assert main_error(capsys, "translate", str(export), "cat", *flags).startswith(
            prefix + "is not a loadable SavedModel")


def test_library_errors_get_the_flag_that_set_the_argument(tmp_path, capsys):
    """`TrainingRun` names its argument `output_dir`; the command line says which
    flag set it (as for `SearchConfigError`)."""
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me")
    assert main_error(capsys, "train", "--output-dir", str(a_file)) == (
        f"kerasseq train: error: --output-dir: output_dir {str(a_file)!r} exists and is not "
        "a directory")
    assert a_file.read_text() == "keep me"


@pytest.mark.slow
def test_tsv_dataset_trains_translates_and_evaluates(tmp_path, capsys):
    """`train --dataset tsv:PATH` end to end in a process of its own; the
    trained model then translates and `evaluate` reports BLEU and chrF."""
    from kerasseq_cli import main

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"go {i}\tve {i}\n" for i in range(60)), encoding="utf-8")
    output = str(tmp_path / "tsv_model")
    result = kerasseq("train", "--dataset", f"tsv:{pairs}", "--epochs", "1",
                      "--output-dir", output, *TINY)
    assert result.returncode == 0, result.stderr[-2000:]
    capsys.readouterr()
    assert main(["translate", output, "go 3", "--jit", "off"]) == 0
    assert capsys.readouterr().out.startswith("go 3\t")
    assert main(["evaluate", output, "--dataset", f"tsv:{pairs}", "--split", "dev"]) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scores["sentences"] == 3 and 0 <= scores["bleu"] <= 100 and 0 <= scores["chrf"] <= 100


def test_tfds_dataset_offline_with_mock_data(tmp_path, capsys):
    import tensorflow_datasets as tfds

    from kerasseq_cli import main

    output = str(tmp_path / "tfds_model")
    dataset = "tfds:ted_hrlr_translate/pt_to_en"
    with tfds.testing.mock_data(num_examples=24, policy=tfds.testing.MockPolicy.USE_CODE):
        assert main(["train", "--dataset", dataset, "--epochs", "1", "--output-dir", output,
                     "--max-target-length", "64", *TINY]) == 0
        assert main(["evaluate", output, "--dataset", dataset, "--split", "dev",
                     "--limit", "5"]) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scores["sentences"] >= 1 and 0 <= scores["bleu"] <= 100


def test_unknown_tfds_dataset_is_one_line_error(tmp_path, capsys):
    line = main_error(capsys, "train", "--dataset", "tfds:no_such_dataset_xyz", "--output-dir",
                      str(tmp_path / "x"))
    assert "could not load" in line


@pytest.mark.slow
def test_a_run_whose_loss_becomes_nan_stops_and_saves_nothing(tmp_path):
    """--learning-rate 1e30 makes the loss NaN in epoch 1: exit 2, no NaN model written."""
    output = tmp_path / "nan"
    result = kerasseq("train", "--epochs", "3", "--learning-rate", "1e30", "--output-dir",
                      str(output), *TINY)
    line = one_line_error(result)
    assert "the training loss became nan at epoch 1, batch" in line, line
    assert "no finished epoch" in line
    assert not (output / "model.keras").exists() and not (output / "best.keras").exists()
    history = (output / "history.csv").read_text() if (output / "history.csv").exists() else ""
    assert "nan" not in history.lower()


def test_help_answers_without_tensorflow():
    """`kerasseq --help` and every command's --help: neither kerasseq nor TensorFlow is
    imported (the console script is `kerasseq_cli:main`, outside the kerasseq package)."""
    code = ("import sys, kerasseq_cli\n"
            "for argv in ([], ['train'], ['translate'], ['evaluate'], ['export'], ['average'],\n"
            "             ['demo']):\n"
            "    try:\n"
            "        kerasseq_cli.main(argv + ['--help'])\n"
            "    except SystemExit as done:\n"
            "        assert done.code == 0, argv\n"
            "assert not {'tensorflow', 'keras', 'kerasseq'} & set(sys.modules), sorted(\n"
            "    m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'kerasseq'))\n"
            "print('ok')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr


def test_python_m_help_answers_without_tensorflow():
    """`python -m kerasseq_cli --help`: usage on stdout, exit 0, TensorFlow never
    imported (`-X importtime` lists every import)."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "kerasseq_cli", "train",
                             "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage: kerasseq train")
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert "kerasseq_cli" in imported
    assert not {"tensorflow", "keras", "kerasseq", "kerasseq_cli.commands"} & imported


def test_console_script_is_the_parser_package():
    """setup.cfg's console script is `kerasseq_cli:main` and `python -m kerasseq`
    runs the same `main` (after importing kerasseq, which registers its classes)."""
    import configparser

    import kerasseq.__main__
    import kerasseq_cli

    config = configparser.ConfigParser()
    config.read(pathlib.Path(__file__).parents[1] / "setup.cfg")
    assert config["options.entry_points"]["console_scripts"].split() == [
        "kerasseq", "=", "kerasseq_cli:main"]
    assert kerasseq.__main__.main is kerasseq_cli.main


def test_defaults_live_in_the_parser():
    """Every option a command reads has its default in the parser (no getattr fallbacks):
    `demo` trains like `train`, so it parses the same run options."""
    from kerasseq_cli import make_parser

    parser = make_parser()
    train = vars(parser.parse_args(["train", "--output-dir", "/tmp/x"]))
    demo = vars(parser.parse_args(["demo"]))
    assert set(train) == set(demo)
    assert demo["output_dir"] == "runs/demo" and demo["epochs"] == 5 and train["epochs"] == 10
    assert train["tensorboard"] is True and train["slow_batches"] == 0.0
    # --jit auto is `resolve_jit_compile("auto")`: XLA on a GPU only
    assert parser.parse_args(["translate", "/tmp/x"]).jit == "auto"
    help_text = " ".join(parser.command_parsers["translate"].format_help().split())
    assert "(default auto: on a GPU, off on a CPU)" in help_text
    source = open(os.path.join(os.path.dirname(__file__), "..", "kerasseq_cli",
                               "commands.py")).read()
    assert "getattr(args" not in source


def test_translate_alignments(trained_dir, trained_model, direct_alignments):
    result = direct_alignments
    translations, links = trained_model.translate(WORDS, num_beams=2, return_alignments=True)
    expected = [f"{word}\t{text}\t" + " ".join(f"{i}-{j}" for i, j in row)
                for word, text, row in zip(WORDS, translations, links, strict=True)]
    assert result.stdout.splitlines() == expected
    # one link per phoneme, each to a letter of the word
    for word, text, row in zip(WORDS, translations, links, strict=True):
        assert [j for _, j in row] == list(range(len(text.split())))
        assert all(0 <= i < len(word) for i, _ in row)
    bad = kerasseq("translate", trained_dir, "cat", "--alignments", "--alignment-layer", "top")
    assert bad.returncode != 0 and "--alignment-layer must be an integer index or 'mean'" in \
        bad.stderr


def test_export_alignments_serves_the_links_of_translate(trained_dir, trained_model, tmp_path,
                                                         beam2_export, direct_alignments):
    """`kerasseq export --alignments`: the door the Python export had and the CLI lacked."""
    import tensorflow as tf

    from kerasseq.export import read_metadata

    export_dir = str(tmp_path / "export")
    result = kerasseq("export", trained_dir, export_dir, "--beam", "2", "--alignments",
                      "--alignment-head", "mean")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "translate_alignments (text -> translation, score, alignment)" in result.stdout
    served = tf.saved_model.load(export_dir).signatures["translate_alignments"](
        text=tf.constant(WORDS))
    translations, links = trained_model.translate(WORDS, num_beams=2, return_alignments=True)
    assert [t.decode() for t in served["translation"].numpy()] == translations
    assert [a.decode() for a in served["alignment"].numpy()] == [
        " ".join(f"{i}-{j}" for i, j in row) for row in links]
    metadata = read_metadata(export_dir)
    assert metadata["signatures"]["translate_alignments"]["outputs"] == [
        "translation", "score", "alignment"]
    assert (metadata["alignment_layer"], metadata["alignment_head"]) == ("mean", "mean")
    # kerasseq translate reads the links from the export's signature
    served_cli, missing = kerasseq_all(
        ("translate", export_dir, *WORDS, "--alignments"),
        # an export without the signature (the plain --beam 2 export)
        ("translate", beam2_export, "cat", "--alignments"))
    assert served_cli.returncode == 0, served_cli.stderr[-2000:]
    assert served_cli.stdout == direct_alignments.stdout
    assert missing.returncode == 2 and "re-export with" in missing.stderr
    assert "--alignments" in missing.stderr
    lone = kerasseq("export", trained_dir, str(tmp_path / "other"), "--alignment-head", "0")
    assert lone.returncode == 2 and "pass --alignments too" in lone.stderr
    assert not os.path.exists(tmp_path / "other")


def test_translate_prints_translations_and_nothing_else(trained_dir):
    """Without TF_CPP_MIN_LOG_LEVEL the CLI silences TensorFlow's native start-up lines."""
    # TensorFlow's defaults: no TF_CPP_MIN_LOG_LEVEL, and oneDNN on (tests/conftest.py
    # turns it off for the suite), whose notice is one of the start-up lines.
    env = {name: value for name, value in os.environ.items()
           if name not in ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS")}
    result = processes.run([sys.executable, "-m", "kerasseq_cli", "translate", trained_dir,
                             *WORDS, "--beam", "1"], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr == ""
    assert [line.split("\t")[0] for line in result.stdout.splitlines()] == WORDS


def test_tsv_with_invalid_utf8_is_a_one_line_error_or_skipped(tmp_path):
    from kerasseq.data import load_pairs

    path = tmp_path / "pairs.tsv"
    lines = [f"word{i}\tmot{i}\n".encode() for i in range(30)]
    lines[7] = "caf\xe9\tcafe\n".encode("latin-1")
    path.write_bytes(b"".join(lines))
    with pytest.raises(ValueError, match="pairs.tsv, line 8: not valid UTF-8"):
        load_pairs(f"tsv:{path}", "train")
    pairs, _ = load_pairs(f"tsv:{path}", "train", on_bad_line="skip")
    assert all("caf" not in source for source, _ in pairs)
    from kerasseq_cli import make_parser

    args = make_parser().parse_args(["train", "--output-dir", "/tmp/x", "--on-bad-line", "skip"])
    assert args.on_bad_line == "skip"
    assert make_parser().parse_args(["evaluate", "/tmp/x"]).on_bad_line == "error"


def tensorboard_events(directory):
    """`{tag: {step: kind}}` of every summary in the event files under `directory`
    (kind: "scalar" with its value, or "image")."""
    events = {}
    for root, _, files in os.walk(directory):
        for name in files:
            if not name.startswith("events.out.tfevents"):
                continue
            for record in tf.data.TFRecordDataset(os.path.join(root, name)):
                event = tf.compat.v1.Event.FromString(record.numpy())
                for value in event.summary.value:
                    plugin = value.metadata.plugin_data.plugin_name
                    if plugin == "images" or value.HasField("image"):
                        kind = "image"
                    else:
                        kind = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") \
                            else float(value.simple_value)
                    events.setdefault(os.path.relpath(root, directory), {}).setdefault(
                        value.tag, {})[event.step] = kind
    return events


def test_train_writes_tensorboard_logs(trained_dir):
    # Issue 16, item 8: loss, learning rate, token accuracy, the dev score and an
    # attention image for every epoch, in OUTPUT_DIR/tensorboard.
    events = tensorboard_events(os.path.join(trained_dir, "tensorboard"))
    assert {"train", "validation"} <= set(events), events.keys()
    train, validation = events["train"], events["validation"]
    for tag in ("epoch_loss", "epoch_learning_rate", "epoch_token_accuracy"):
        assert set(train.get(tag, {})) == {0, 1}, (tag, sorted(train))
    assert all(value == pytest.approx(1e-2) for value in train["epoch_learning_rate"].values())
    for tag in ("epoch_loss", "epoch_token_accuracy", "epoch_dev_wer", "epoch_dev_per"):
        assert set(validation.get(tag, {})) == {0, 1}, (tag, sorted(validation))
    assert set(validation["attention"].values()) == {"image"}
    assert set(validation["attention"]) == {0, 1}
    with open(os.path.join(trained_dir, "summary.json")) as handle:
        history = json.load(handle)["history"]
    # The scalars are the run's own numbers (history.csv holds the model's
    # metrics only: its columns stay the same when a run resumes with other
    # TensorBoard flags).
    for epoch in (0, 1):
        assert train["epoch_loss"][epoch] == pytest.approx(history["loss"][epoch], rel=1e-5)
        assert validation["epoch_loss"][epoch] == pytest.approx(history["val_loss"][epoch],
                                                                rel=1e-5)
        assert 0.0 <= validation["epoch_dev_wer"][epoch] <= 1.0
    assert "dev_wer" not in history


def test_translate_hands_its_one_search_config_to_the_translator(tmp_path, monkeypatch, capsys):
    """`kerasseq translate --beam 2`: the command builds one `SearchConfig`, checks it
    once (one `__post_init__` in the whole command) and the `Translator` gets that
    object as `config=`, with no field overrides; the search runs with it, its
    `max_length` filled in from the model's."""
    from kerasseq import translator as translator_module
    from kerasseq.data import TextTokenizer
    from kerasseq.decoding.config import SearchConfig
    from kerasseq.models import build_rnn_seq2seq
    from kerasseq_cli import main

    words = TextTokenizer.from_texts(WORDS, split="character")
    phonemes = TextTokenizer.from_texts(["K AE T", "D AO G"], split="whitespace")
    model = build_rnn_seq2seq(embedding_dim=4, units=8, source_tokenizer=words,
                              target_tokenizer=phonemes, max_target_length=6)
    path = str(tmp_path / "tiny.keras")
    model.save(path)

    checks, received = [], []
    post_init = SearchConfig.__post_init__
    monkeypatch.setattr(SearchConfig, "__post_init__",
                        lambda self: (checks.append(self), post_init(self))[1])
    init = translator_module.Translator.__init__

    def spy(self, model, config=None, **overrides):
        received.append((config, overrides))
        init(self, model, config, **overrides)
        received.append(self)

    monkeypatch.setattr(translator_module.Translator, "__init__", spy)
    capsys.readouterr()
    assert main(["translate", path, *WORDS, "--beam", "2", "--length-penalty", "0.5"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(WORDS)
    assert len(checks) == 1  # the command's own SearchConfig, and nothing else
    (config, overrides), translator = received
    assert config is checks[0] and overrides == {}
    assert (config.method, config.num_beams, config.length_penalty) == ("beam", 2, 0.5)
    assert translator.config is config and config.max_length is None
    assert translator._search_config.max_length == translator.max_length == 6


def test_train_batch_tokens_reaches_the_training_batches(tmp_path, monkeypatch):
    """`kerasseq train --batch-tokens 48` (no --batch-size): the run's training
    batches are made by token count without a row cap, each batch
    holding at most 48 tokens, padding included; dev batches keep up to 64 rows."""
    from kerasseq.data import batch_shapes
    from kerasseq.training import TrainingRun
    from kerasseq_cli import main

    seen, original = [], TrainingRun.datasets

    def spy(self, *args, **kwargs):
        data = original(self, *args, **kwargs)
        seen.append((args[4], kwargs.get("batch_tokens"), data))
        return data

    monkeypatch.setattr(TrainingRun, "datasets", spy)
    at = TINY.index("--batch-size")
    tiny = TINY[:at] + TINY[at + 2:]
    assert main(["train", *tiny, "--epochs", "1", "--model", "transformer", "--num-layers", "1",
                 "--d-model", "16", "--dff", "16", "--batch-tokens", "48",
                 "--output-dir", str(tmp_path / "run")]) == 0
    (batch_size, tokens, (train, dev)), = seen
    assert batch_size is None and tokens == 48
    shapes = {(rows, length) for ((rows, length), *_) in batch_shapes(train).elements()}
    # (without XLA on CPU a batch is as long as its longest pair: within the budget)
    assert shapes and all(rows * length <= 48 or rows == 1 for rows, length in shapes)
    assert len({rows for rows, _ in shapes}) > 2  # rows vary with the length, not fixed
    dev_rows = [len(labels) for _, labels in dev.as_numpy_iterator()]
    assert len(dev_rows) == 1 and 16 < dev_rows[0] <= 64  # the few dev pairs: one batch of 64
    assert os.path.exists(tmp_path / "run" / "model.keras")
