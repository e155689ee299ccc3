"""Tests for `kerasseq.export`: a text-in, text-out SavedModel.

One tiny G2P model is trained once per module and exported once, and so are
an untrained Transformer, an ensemble of the two, and an untrained
mixed-precision Transformer with a guided alignment head. The exports are
then served in one separate Python process in which kerasseq cannot be
imported, by both of TensorFlow's loaders: first the session-based one of TF
Serving and `saved_model_cli run`, then `tf.saved_model.load`. Their answers
are compared with each other and with `model.translate` in this process.
"""

import collections
import functools
import json
import math
import os
import re
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasseq import SearchConfig, decoding, export, translator
from kerasseq._files import replace_directory_atomically, stale_siblings
from kerasseq.export import (
    ALIGNMENTS_SIGNATURE,
    NBEST_SIGNATURE,
    SERVING_SIGNATURE,
    check_export_path,
    export_translator,
    make_translator,
    read_metadata,
)
from kerasseq.models import Ensemble, build_rnn_seq2seq, build_transformer_seq2seq
from tests import processes
from tests.decoding.toy_models import END_ID, START_ID, PrefixTableModel
from tests.models.g2p_fixture import tiny_g2p_model, trained_tiny_g2p_rnn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUM_BEAMS = 3
BLANK_TEXTS = ["", " ", "\t\n ", "\u3000", "\xa0 "]
UNKNOWN_TEXT = "ß☃q"
LONG_TEXT = ("abcdefghij" * 1000)[:10_000]
CHILD_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}

# Runs in `python -I` (no PYTHONPATH, no current directory on sys.path). The
# editable install of kerasseq still registers a meta-path finder from a .pth
# file, so the script removes it and every sys.path entry that holds a
# `kerasseq` package, then checks that `import kerasseq` really fails.
ISOLATED_SERVER = r"""
import json, math, os, sys

repo = sys.argv[1]
editable = lambda hook: "__editable__" in (getattr(hook, "__module__", None) or "")
sys.meta_path[:] = [finder for finder in sys.meta_path if not editable(finder)]
sys.path_hooks[:] = [hook for hook in sys.path_hooks if not editable(hook)]
sys.path_importer_cache.clear()
holds_kerasseq = lambda entry: os.path.isdir(os.path.join(entry or ".", "kerasseq"))
sys.path[:] = [entry for entry in sys.path if not holds_kerasseq(entry)]
assert repo not in [os.path.abspath(entry or ".") for entry in sys.path]
try:
    import kerasseq
except ImportError:
    pass
else:
    raise SystemExit("isolation failed: kerasseq imported from " + kerasseq.__file__)

import numpy as np
import tensorflow as tf

# {output: values as lists (bytes decoded), output + "_shape": shape}
def as_json(outputs):
    decode = lambda value: (value.decode("utf-8") if isinstance(value, bytes)
                            else [decode(item) for item in value] if isinstance(value, list)
                            else value)
    result = {}
    for name, value in outputs.items():
        value = np.asarray(value)
        result[name], result[name + "_shape"] = decode(value.tolist()), list(value.shape)
    return result

# Every signature on every request through the session-based loader (TF
# Serving's, the C API's, `saved_model_cli run`'s), in a graph of its own.
def session_serve(export_dir, requests):
    try:
        with tf.Graph().as_default() as graph, tf.compat.v1.Session(graph=graph) as session:
            meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir)
            signatures = {name: signature for name, signature in meta_graph.signature_def.items()
                          if not name.startswith("__")}  # not __saved_model_init_op
            results = {}
            for request, texts in requests.items():
                text = np.array(texts, dtype=object).reshape([len(texts)])
                results[request] = {
                    name: as_json(session.run(
                        {key: info.name for key, info in signature.outputs.items()},
                        {signature.inputs["text"].name: text}))
                    for name, signature in signatures.items()}
            return results
    except Exception as error:  # reported per request, for the test that checks it
        message = f"{type(error).__name__}: {str(error).strip().splitlines()[0]}"
        return {request: {"error": message} for request in requests}

def serve(translator, texts):
    text = tf.constant(texts, tf.string, shape=[len(texts)])
    signatures = {name: as_json(function(text=text))
                  for name, function in translator.signatures.items()}
    return {**signatures["serving_default"], **signatures["translate_nbest"],
            "signatures": signatures}

requests = json.load(sys.stdin)
# The session-based loader first, before this process runs anything eagerly.
sessions = {export_dir: session_serve(export_dir, named) for export_dir, named in requests.items()}
results = {}
for export_dir, named in requests.items():
    translator = tf.saved_model.load(export_dir)
    results[export_dir] = {name: {**serve(translator, texts), "session": sessions[export_dir][name]}
                           for name, texts in named.items()}
results["kerasseq_imported"] = "kerasseq" in sys.modules
print("RESULTS " + json.dumps(results))
"""


def serve_in_fresh_process(requests, cwd):
    """Call every signature of SavedModels in one isolated Python process.

    Args:
        requests: `{export_dir: {request_name: [texts]}}`.
        cwd: working directory of the process.

    Returns:
        `{export_dir: {request_name: outputs}, "kerasseq_imported": bool}`;
        `outputs` has the keys of `serving_default` and `translate_nbest`
        (`translation`, `score`, `translations`, `scores`, each also with
        `_shape`) from `tf.saved_model.load`, `signatures`: `{signature:
        {output: values, output_shape: shape}}` for every signature, from
        `tf.saved_model.load`, and `session`: the same from the
        session-based loader, or `{"error": "Type: message"}`.
    """
    completed = subprocess.run(
        [sys.executable, "-I", "-c", ISOLATED_SERVER, REPO],
        input=json.dumps(requests), capture_output=True, text=True, env=CHILD_ENV,
        cwd=cwd, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    line = [line for line in completed.stdout.splitlines() if line.startswith("RESULTS ")]
    assert line, completed.stdout[-2000:] + completed.stderr[-2000:]
    return json.loads(line[-1][len("RESULTS "):])


# --------------------------------------------------------------------------
# Fixtures: one trained model, one export, one fresh-process run.
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def g2p_model():
    """A Bahdanau-attention RNN trained briefly (test_translation.py's), and 6 of its words."""
    model, words, _ = trained_tiny_g2p_rnn(seed=3, epochs=10)
    assert model.attention == "bahdanau"
    return model, words[:6]


@pytest.fixture(scope="module")
def rnn_export(g2p_model, tmp_path_factory):
    model, _ = g2p_model
    path = tmp_path_factory.mktemp("rnn") / "export"
    export_translator(model, path, num_beams=NUM_BEAMS, alignments=True)
    return path


@pytest.fixture(scope="module")
def transformer_export(g2p_model, tmp_path_factory):
    """An untrained tiny Transformer and its export."""
    model = tiny_g2p_model(build_transformer_seq2seq, 5, num_layers=1, d_model=16, num_heads=2,
                           dff=32, dropout=0.0, max_positions=12)
    path = tmp_path_factory.mktemp("transformer") / "export"
    export_translator(model, path, num_beams=NUM_BEAMS, alignments=True)
    return model, path


@pytest.fixture(scope="module")
def other_exports(g2p_model, transformer_export, tmp_path_factory):
    """`{kind: (model, export path)}`: the other kinds of model an export serves.

    An ensemble of the trained RNN and the Transformer (it has no
    `translate_alignments`: its members attend differently), and an
    untrained Transformer built under the `mixed_float16` policy whose second
    head is the guided one (`translate_alignments` reads that head). One
    model is both guided and mixed-precision: each export costs its traces
    here and its loads in the serving process.
    """
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        guided = tiny_g2p_model(build_transformer_seq2seq, 6, num_layers=1, d_model=16,
                                num_heads=2, dff=32, dropout=0.0, max_positions=12,
                                guided_alignment_weight=1.0, guided_alignment_head=1)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assert guided.guided_head == (0, 1) and guided.compute_dtype == "float16"
    models = {
        "ensemble": (Ensemble([g2p_model[0], transformer_export[0]]), False),
        "guided_mixed_precision": (guided, True),
    }
    exports = {}
    for kind, (model, alignments) in models.items():
        path = tmp_path_factory.mktemp(kind) / "export"
        export_translator(model, path, num_beams=NUM_BEAMS, alignments=alignments)
        exports[kind] = (model, path)
    return exports


@pytest.fixture(scope="module")
def all_served(g2p_model, rnn_export, transformer_export, other_exports):
    _, words = g2p_model
    requests = {str(rnn_export): {
        "words": words,
        "mixed": [words[0], "", words[1], "   "],
        "blank": BLANK_TEXTS,
        "unknown": [UNKNOWN_TEXT],
        "long": [LONG_TEXT],
        "empty_batch": [],
    }, str(transformer_export[1]): {
        "words": words, "blank": BLANK_TEXTS, "long": [LONG_TEXT], "empty_batch": [],
    }}
    for _, path in other_exports.values():
        requests[str(path)] = {"words": words + [""]}
    return serve_in_fresh_process(requests, cwd=os.path.dirname(str(rnn_export)))


@pytest.fixture(scope="module")
def served(all_served, rnn_export):
    return {**all_served[str(rnn_export)], "kerasseq_imported": all_served["kerasseq_imported"]}


def beam_translate(model, texts, num_return=1):
    return model.translate(texts, method="beam", num_beams=NUM_BEAMS,
                           num_return=num_return, return_scores=True)


# --------------------------------------------------------------------------
# Serving in a process without kerasseq.
# --------------------------------------------------------------------------


@pytest.mark.slow
def test_fresh_process_matches_in_process_translate(g2p_model, served):
    model, words = g2p_model
    assert served["kerasseq_imported"] is False
    expected, expected_scores = beam_translate(model, words)
    assert served["words"]["translation"] == expected
    np.testing.assert_allclose(served["words"]["score"], np.ravel(expected_scores), atol=1e-4)
    assert any(expected), "the fixture model should produce some phonemes"


@pytest.mark.slow
def test_fresh_process_nbest_matches_in_process_translate(g2p_model, served):
    model, words = g2p_model
    expected, expected_scores = beam_translate(model, words, num_return=NUM_BEAMS)
    assert served["words"]["translations_shape"] == [len(words), NUM_BEAMS]
    assert served["words"]["translations"] == expected
    np.testing.assert_allclose(served["words"]["scores"], expected_scores, atol=1e-4)
    # The first column of the n-best list is the serving_default answer.
    assert [row[0] for row in served["words"]["translations"]] == served["words"]["translation"]


@pytest.mark.slow
def test_blank_texts_give_empty_translation_and_zero_score(g2p_model, served):
    model, words = g2p_model
    blank = served["blank"]
    assert blank["translation"] == [""] * len(BLANK_TEXTS)
    assert blank["score"] == [0.0] * len(BLANK_TEXTS)
    assert blank["scores"] == [[0.0] * NUM_BEAMS] * len(BLANK_TEXTS)
    # Blank rows inside a batch leave the other rows untouched.
    mixed = served["mixed"]
    expected, expected_scores = beam_translate(model, words[:2])
    assert mixed["translation"] == [expected[0], "", expected[1], ""]
    np.testing.assert_allclose(
        mixed["score"], [expected_scores[0], 0.0, expected_scores[1], 0.0], atol=1e-4
    )


@pytest.mark.slow
def test_unknown_characters_and_long_inputs_are_translated(g2p_model, served):
    model, _ = g2p_model
    expected, expected_scores = beam_translate(model, [UNKNOWN_TEXT])
    assert served["unknown"]["translation"] == expected
    np.testing.assert_allclose(served["unknown"]["score"], np.ravel(expected_scores), atol=1e-4)
    # The tokenizer has no max_length, so the export keeps 256 tokens (characters).
    expected, expected_scores = beam_translate(model, [LONG_TEXT[:256]])
    assert served["long"]["translation"] == expected
    np.testing.assert_allclose(served["long"]["score"], np.ravel(expected_scores), atol=1e-4)
    for name in ("blank", "unknown", "long", "words"):
        assert not any(math.isnan(score) for score in served[name]["score"]), name


@pytest.mark.slow
def test_empty_batch_gives_empty_outputs(served):
    empty = served["empty_batch"]
    assert empty["translation_shape"] == [0] and empty["translation"] == []
    assert empty["translations_shape"] == [0, NUM_BEAMS] and empty["scores"] == []


@pytest.mark.slow
def test_transformer_export_matches_in_process_translate(g2p_model, transformer_export,
                                                        all_served):
    model, path = transformer_export
    served = all_served[str(path)]
    _, words = g2p_model
    expected, expected_scores = beam_translate(model, words)
    assert served["words"]["translation"] == expected
    np.testing.assert_allclose(served["words"]["score"], np.ravel(expected_scores), atol=1e-4)
    expected, expected_scores = beam_translate(model, words, num_return=NUM_BEAMS)
    assert served["words"]["translations"] == expected
    np.testing.assert_allclose(served["words"]["scores"], expected_scores, atol=1e-4)
    # Sources are cut to the model's position table (max_positions=12 tokens).
    assert read_metadata(str(path))["max_source_length"] == 12
    assert served["long"]["translation"] == beam_translate(model, [LONG_TEXT[:12]])[0]
    assert served["blank"]["translation"] == [""] * len(BLANK_TEXTS)
    assert served["blank"]["score"] == [0.0] * len(BLANK_TEXTS)
    assert served["empty_batch"]["translations_shape"] == [0, NUM_BEAMS]


# --------------------------------------------------------------------------
# The session-based loader: TF Serving, the C API, `saved_model_cli run`.
# --------------------------------------------------------------------------


def assert_same_outputs(got, expected, where):
    """Two `{output: values, output_shape: shape}` dicts: equal strings and
    shapes, scores within float32 round-off."""
    assert sorted(got) == sorted(expected), where
    for name, value in expected.items():
        if name in ("score", "scores"):
            np.testing.assert_allclose(got[name], value, atol=1e-5, err_msg=where)
        else:
            assert got[name] == value, where


@pytest.mark.slow
def test_session_based_loader_serves_every_signature_like_tf_saved_model_load(
        rnn_export, transformer_export, other_exports, all_served):
    """Each signature of each export answers each request the same through
    `tf.compat.v1.saved_model.loader.load` in a session as through
    `tf.saved_model.load` (which the other tests compare with `translate`)."""
    alignments = {str(rnn_export): True, str(transformer_export[1]): True,
                  **{str(path): kind != "ensemble" for kind, (_, path) in other_exports.items()}}
    for export_dir, aligns in alignments.items():
        signatures = sorted([SERVING_SIGNATURE, NBEST_SIGNATURE] + [ALIGNMENTS_SIGNATURE] * aligns)
        for request, served in all_served[export_dir].items():
            where = f"{export_dir} {request}"
            session = served["session"]
            assert "error" not in session, f"{where}: {session.get('error')}"
            assert sorted(served["signatures"]) == signatures, where
            assert sorted(session) == signatures, where
            for name in signatures:
                assert_same_outputs(session[name], served["signatures"][name], f"{where} {name}")


def links_string(links):
    return " ".join(f"{i}-{j}" for i, j in links)


@pytest.mark.slow
def test_alignments_signature_matches_in_process_translate(g2p_model, rnn_export,
                                                           transformer_export, all_served):
    _, words = g2p_model
    for model, path in [(g2p_model[0], rnn_export), transformer_export]:
        served = all_served[str(path)]["words"]["signatures"][ALIGNMENTS_SIGNATURE]
        translations, scores, links = model.translate(
            words, method="beam", num_beams=NUM_BEAMS, return_scores=True,
            return_alignments=True)
        assert served["translation"] == translations and served["alignment_shape"] == [len(words)]
        np.testing.assert_allclose(served["score"], scores, atol=1e-4)
        assert served["alignment"] == [links_string(row) for row in links]
        assert served["translation"] == all_served[str(path)]["words"]["translation"]
        # Only blank texts, or none: no source token to align, no crash.
        blank = all_served[str(path)]["blank"]["signatures"][ALIGNMENTS_SIGNATURE]
        assert blank["alignment"] == blank["translation"] == [""] * len(BLANK_TEXTS)
        empty = all_served[str(path)]["empty_batch"]["signatures"][ALIGNMENTS_SIGNATURE]
        assert empty["alignment_shape"] == empty["translation_shape"] == [0]


@pytest.mark.parametrize("kind", ["ensemble", "guided_mixed_precision"])
@pytest.mark.slow
def test_other_exports_match_in_process_translate(g2p_model, other_exports, all_served, kind):
    """An ensemble and a guided-alignment, mixed-precision Transformer: every
    signature (served by both loaders, see above) equals `translate`.

    Up to float16 round-off for the mixed-precision model: its graph in the
    SavedModel and `translate`'s are optimized apart, and scores differ in
    the third decimal (measured: up to 0.01 of about -25), which may reorder
    near-tied hypotheses below the best one (measured: a third one).
    """
    model, path = other_exports[kind]
    texts = g2p_model[1] + [""]
    served = all_served[str(path)]["words"]["signatures"]
    alignments = kind != "ensemble"
    results = model.translate(texts, method="beam", num_beams=NUM_BEAMS, num_return=NUM_BEAMS,
                              return_scores=True, return_alignments=alignments)
    translations, scores = results[:2]
    columns, atol = (1, 0.05) if kind.endswith("mixed_precision") else (NUM_BEAMS, 1e-4)
    nbest = served[NBEST_SIGNATURE]
    assert nbest["translations_shape"] == [len(texts), NUM_BEAMS]
    assert [row[:columns] for row in nbest["translations"]] == [
        row[:columns] for row in translations]
    np.testing.assert_allclose(np.array(nbest["scores"])[:, :columns],
                               np.array(scores)[:, :columns], atol=atol)
    best = served[SERVING_SIGNATURE]
    assert best["translation"] == [row[0] for row in translations]
    np.testing.assert_allclose(best["score"], [row[0] for row in scores], atol=atol)
    if alignments:
        aligned = served[ALIGNMENTS_SIGNATURE]
        assert aligned["translation"] == best["translation"]
        np.testing.assert_allclose(aligned["score"], best["score"], atol=1e-5)
        assert aligned["alignment"] == [links_string(row[0]) for row in results[2]]
        metadata = read_metadata(str(path))  # the guided head, the default of both
        assert (metadata["alignment_layer"], metadata["alignment_head"]) == model.guided_head
    assert best["translation"][-1] == "" and best["score"][-1] == 0.0


# TensorFlow's `saved_model_cli` (the module every TensorFlow ships; the console
# script of that name only calls its `main`), run as a forked command: a fresh
# process would import TensorFlow only to read a SavedModel's signatures.
SAVED_MODEL_CLI = r"""
import sys

from tensorflow.python.tools.saved_model_cli import main

sys.argv[0] = "saved_model_cli"
main()
"""


def test_saved_model_cli_lists_the_string_signatures(rnn_export):
    completed = processes.run(
        [sys.executable, "-c", SAVED_MODEL_CLI, "show", "--dir", str(rnn_export), "--all"],
        forked=True, capture_output=True, text=True, env=CHILD_ENV, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    output = completed.stdout
    serving = output.split(f"signature_def['{SERVING_SIGNATURE}']")[1].split("signature_def[")[0]
    assert "inputs['text'] tensor_info:" in serving
    assert "dtype: DT_STRING" in serving and "shape: (-1)" in serving
    assert "outputs['translation'] tensor_info:" in serving
    assert "outputs['score'] tensor_info:" in serving and "DT_FLOAT" in serving
    nbest = output.split(f"signature_def['{NBEST_SIGNATURE}']")[1].split("signature_def[")[0]
    assert "outputs['translations'] tensor_info:" in nbest
    assert f"shape: (-1, {NUM_BEAMS})" in nbest


@pytest.mark.slow
def test_saved_model_cli_run_serves_the_export(g2p_model, rnn_export, all_served, tmp_path):
    """`saved_model_cli run`, the check docs/export.md gives, answers as
    `tf.saved_model.load` does (it loads the export in a session)."""
    _, words = g2p_model
    completed = processes.run(
        [sys.executable, "-c", SAVED_MODEL_CLI, "run", "--dir", str(rnn_export),
         "--tag_set", "serve", "--signature_def", ALIGNMENTS_SIGNATURE,
         "--input_exprs", f"text={words!r}", "--outdir", str(tmp_path)],
        forked=True, capture_output=True, text=True, env=CHILD_ENV, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    expected = all_served[str(rnn_export)]["words"]["signatures"][ALIGNMENTS_SIGNATURE]
    for name in ("translation", "alignment"):
        values = np.load(tmp_path / f"{name}.npy", allow_pickle=True)  # bytes objects
        assert [value.decode("utf-8") for value in values] == expected[name]
    np.testing.assert_allclose(np.load(tmp_path / "score.npy"), expected["score"], atol=1e-5)


def test_metadata_records_the_search(rnn_export, g2p_model):
    metadata = read_metadata(str(rnn_export))
    assert metadata["method"] == "beam" and metadata["num_beams"] == NUM_BEAMS
    assert metadata["num_return"] == NUM_BEAMS
    assert metadata["max_length"] == g2p_model[0].max_target_length
    assert metadata["max_source_length"] == 256


# --------------------------------------------------------------------------
# Atomic writes.
# --------------------------------------------------------------------------


@pytest.mark.slow
def test_failed_export_keeps_the_previous_one(g2p_model, rnn_export, served, monkeypatch):
    model, words = g2p_model

    def broken_save(obj, export_dir, signatures=None, options=None):
        with open(os.path.join(export_dir, "saved_model.pb"), "wb") as handle:
            handle.write(b"half written")
        raise RuntimeError("disk full")

    monkeypatch.setattr(tf.saved_model, "save", broken_save)
    with pytest.raises(RuntimeError, match="disk full"):
        export_translator(model, rnn_export, method="greedy", max_length=4)
    monkeypatch.undo()
    assert os.listdir(os.path.dirname(rnn_export)) == ["export"]
    translator = tf.saved_model.load(str(rnn_export))
    outputs = translator.signatures[SERVING_SIGNATURE](text=tf.constant(words))
    assert [text.decode() for text in outputs["translation"].numpy()] == served["words"]["translation"]
    np.testing.assert_allclose(outputs["score"].numpy(), served["words"]["score"], atol=1e-5)


def write_atomically(path, write, overwrite=True):
    """What `export_translator` does with its `write`: kerasseq._files' one
    directory writer, replacing only what `check_export_path` allows."""
    return replace_directory_atomically(
        path, write, check=lambda existing: check_export_path(existing, overwrite=overwrite))


def write_files(contents):
    """A `write` for `write_atomically`: content.txt, plus a saved_model.pb so
    that the directory counts as a SavedModel (only those are replaced)."""
    def write(directory):
        with open(os.path.join(directory, "content.txt"), "w") as handle:
            handle.write(contents)
        with open(os.path.join(directory, "saved_model.pb"), "wb") as handle:
            handle.write(b"")
    return write


def read_content(path):
    with open(os.path.join(path, "content.txt")) as handle:
        return handle.read()


def test_write_atomically_replaces_and_restores(tmp_path, monkeypatch):
    path = str(tmp_path / "target")
    write_atomically(path, write_files("one"))
    write_atomically(path, write_files("two"))
    assert read_content(path) == "two" and os.listdir(tmp_path) == ["target"]

    real_rename = os.rename

    def failing_rename(source, destination):
        if os.path.basename(source).startswith(".target.tmp-"):
            raise OSError("rename failed")
        return real_rename(source, destination)

    monkeypatch.setattr(os, "rename", failing_rename)
    with pytest.raises(OSError, match="rename failed"):
        write_atomically(path, write_files("three"))
    monkeypatch.undo()
    assert read_content(path) == "two" and os.listdir(tmp_path) == ["target"]

    with pytest.raises(FileExistsError, match="target"):
        write_atomically(path, write_files("four"), overwrite=False)
    assert read_content(path) == "two" and os.listdir(tmp_path) == ["target"]


def exited_process_id():
    """The id of a process that has exited (and been reaped)."""
    process = subprocess.Popen([sys.executable, "-I", "-S", "-c", ""])
    process.wait()
    return process.pid


def test_later_export_removes_leftovers_of_killed_exports(tmp_path):
    path = str(tmp_path / "target")
    write_atomically(path, write_files("one"))
    dead = exited_process_id()
    running = subprocess.Popen([sys.executable, "-I", "-S", "-c", "import time; time.sleep(300)"])
    token = "0123456789ab"
    stale_export = f".target.tmp-{dead}-{token}"  # killed while writing
    stale_old = f".target.old-{dead}-{token}"  # killed after setting the old export aside
    kept = [
        f".target.tmp-{running.pid}-{token}",  # an export still running
        f".target.old-{running.pid}-{token}",
        f".target2.tmp-{dead}-{token}",  # another path's
        f".target.tmp-{dead}-not-a-token",  # not named by kerasseq._files
        f"target.old-{dead}-{token}",  # not hidden
    ]
    try:
        for name in [stale_export, stale_old, *kept]:
            (tmp_path / name).mkdir()
            write_files("leftover")(str(tmp_path / name))
        assert stale_siblings(path) == {"tmp": [str(tmp_path / stale_export)],
                                        "old": [str(tmp_path / stale_old)]}

        def failing_write(directory):
            raise RuntimeError("disk full")

        # A failed export removes stale temporary directories but keeps a
        # set-aside export: it may be the only complete copy.
        with pytest.raises(RuntimeError, match="disk full"):
            write_atomically(path, failing_write)
        assert sorted(os.listdir(tmp_path)) == sorted(["target", stale_old, *kept])
        write_atomically(path, write_files("two"))
        assert read_content(path) == "two"
        assert sorted(os.listdir(tmp_path)) == sorted(["target", *kept])
    finally:
        running.kill()
        running.wait()


# Replaces the export at argv[1] and SIGKILLs itself right after the first
# rename (the old export moved aside), before the new one is renamed in.
KILLED_BETWEEN_RENAMES = r"""
import os, signal, sys

from kerasseq._files import replace_directory_atomically

real_rename = os.rename

def rename(source, destination):
    real_rename(source, destination)
    if ".old-" in os.path.basename(destination):
        os.kill(os.getpid(), signal.SIGKILL)

os.rename = rename

def write(directory):
    with open(os.path.join(directory, "content.txt"), "w") as handle:
        handle.write("two")

replace_directory_atomically(sys.argv[1], write)
"""


def test_sigkill_between_the_renames_leaves_whole_exports(tmp_path):
    path = str(tmp_path / "target")
    write_atomically(path, write_files("one"))
    killed = processes.run([sys.executable, "-c", KILLED_BETWEEN_RENAMES, path], forked=True,
                           capture_output=True, text=True, env=CHILD_ENV, cwd=REPO, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert not os.path.exists(path)
    (old,) = [name for name in os.listdir(tmp_path) if name.startswith(".target.old-")]
    (new,) = [name for name in os.listdir(tmp_path) if name.startswith(".target.tmp-")]
    assert old.split("-", 1)[1] == new.split("-", 1)[1]  # same process and token
    assert read_content(tmp_path / old) == "one" and read_content(tmp_path / new) == "two"
    write_atomically(path, write_files("three"))
    assert read_content(path) == "three" and os.listdir(tmp_path) == ["target"]


def test_existing_path_without_overwrite_raises(g2p_model, tmp_path):
    model, _ = g2p_model
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="taken"):
        export_translator(model, tmp_path / "taken", overwrite=False)


# --------------------------------------------------------------------------
# An export never destroys what is not an export.
# --------------------------------------------------------------------------


def snapshot(path):
    """Everything at `path`, to compare byte for byte: a symbolic link's
    target name, a file's bytes, a directory's tree (names and file bytes)."""
    if os.path.islink(path):
        return ("link", os.readlink(path), snapshot(os.path.realpath(path)))
    if os.path.isfile(path):
        with open(path, "rb") as handle:
            return ("file", handle.read())
    tree = {}
    for root, directories, files in os.walk(path):
        relative = os.path.relpath(root, path)
        tree[relative] = sorted(directories)
        for name in files:
            with open(os.path.join(root, name), "rb") as handle:
                tree[os.path.join(relative, name)] = handle.read()
    return ("directory", tree)


def make_keras_file(model, parent):
    path = parent / "model.keras"
    model.save(str(path))
    return path


def make_text_file(model, parent):
    path = parent / "notes.txt"
    path.write_text("not an export\n")
    return path


def make_directory(model, parent):
    path = parent / "run"
    (path / "checkpoints").mkdir(parents=True)
    (path / "history.json").write_text("{}")
    (path / "checkpoints" / "epoch1.weights.h5").write_bytes(b"\x89HDF weights")
    return path


def make_link_to_keras_file(model, parent):
    target = make_keras_file(model, parent)
    path = parent / "latest"
    path.symlink_to(target.name)
    return path


NOT_EXPORTS = {
    "keras_file": (make_keras_file, "a file (a .keras model)"),
    "text_file": (make_text_file, "a file"),
    "directory": (make_directory, "a non-empty directory without saved_model.pb"),
    "link_to_keras_file": (make_link_to_keras_file, "a symbolic link to 'model.keras'"),
}


@pytest.mark.parametrize("overwrite", [True, False])
@pytest.mark.parametrize("kind", list(NOT_EXPORTS))
def test_export_never_replaces_what_is_not_an_export(g2p_model, tmp_path, kind, overwrite):
    model, _ = g2p_model
    make, content = NOT_EXPORTS[kind]
    path = make(model, tmp_path)
    before, listing = snapshot(path), sorted(os.listdir(tmp_path))
    with pytest.raises(FileExistsError) as raised:
        export_translator(model, path, overwrite=overwrite)
    message = str(raised.value)
    assert repr(str(path)) in message and content in message, message
    assert "SavedModel directory (one holding saved_model.pb)" in message, message
    assert "\n" not in message
    assert snapshot(path) == before
    assert sorted(os.listdir(tmp_path)) == listing  # no .NAME.export-* left behind


@pytest.mark.parametrize("kind", ["keras_file", "directory"])
def test_write_atomically_checks_again_before_the_rename(g2p_model, tmp_path, kind):
    """Something that appears at `path` while the export is written is kept."""
    model, _ = g2p_model
    make, content = NOT_EXPORTS[kind]
    path = tmp_path / {"keras_file": "model.keras", "directory": "run"}[kind]
    appeared = {}

    def write(directory):
        write_files("new")(directory)
        appeared["path"] = make(model, tmp_path)
        appeared["before"] = snapshot(path)

    with pytest.raises(FileExistsError, match=re.escape(content)):
        write_atomically(str(path), write)
    assert appeared["path"] == path and snapshot(path) == appeared["before"]
    assert os.listdir(tmp_path) == [path.name]


def test_export_replaces_an_empty_directory_and_an_earlier_export(g2p_model, tmp_path):
    model, words = g2p_model
    path = tmp_path / "export"
    path.mkdir()
    export_translator(model, path, method="greedy", max_length=4)
    assert read_metadata(str(path))["max_length"] == 4
    export_translator(model, path, method="greedy", max_length=5, overwrite=True)
    assert read_metadata(str(path))["max_length"] == 5
    assert os.listdir(tmp_path) == ["export"]
    translator = tf.saved_model.load(str(path))
    outputs = translator.signatures[SERVING_SIGNATURE](text=tf.constant(words[:1]))
    assert outputs["translation"].shape == (1,)


def test_a_link_to_an_export_is_replaced_and_its_target_kept(tmp_path):
    target = tmp_path / "v1"
    write_atomically(str(target), write_files("one"))
    link = tmp_path / "current"
    link.symlink_to("v1")
    write_atomically(str(link), write_files("two"))
    assert not os.path.islink(link) and read_content(link) == "two"
    assert read_content(target) == "one"
    assert sorted(os.listdir(tmp_path)) == ["current", "v1"]


# --------------------------------------------------------------------------
# Arguments.
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, name", [
    ({"method": "sample"}, "method"),
    ({"num_beams": 0}, "num_beams"),
    ({"num_beams": 2, "num_return": 3}, "num_return"),
    ({"method": "greedy", "num_return": 2}, "num_return"),
    ({"length_penalty": -1.0}, "length_penalty"),
    ({"max_length": 0}, "max_length"),
    ({"max_source_length": 0}, "max_source_length"),
    ({"overwrite": "yes"}, "overwrite"),
])
def test_bad_arguments_name_the_argument(g2p_model, tmp_path, kwargs, name):
    with pytest.raises(ValueError, match=name):
        export_translator(g2p_model[0], tmp_path / "out", **kwargs)
    assert not os.path.exists(tmp_path / "out")


def test_export_defaults_and_rule(g2p_model):
    """`make_translator`: `num_return` = every beam unless a config or a setting
    says otherwise, 256 source tokens or a smaller position table, no sampling."""
    model = g2p_model[0]
    transformer = tiny_g2p_model(build_transformer_seq2seq, 0, num_layers=1, d_model=8,
                                 num_heads=2, dff=8, max_positions=12)
    cases = [(model, None, {"num_beams": 3}, 3, 256),
             (model, SearchConfig(num_beams=3, num_return=2), {}, 2, 256),
             (model, None, {"num_beams": 3, "num_return": 1}, 1, 256),
             (model, None, {"method": "greedy"}, 1, 256),
             (model, None, {"max_source_length": 7}, 4, 7),
             (transformer, None, {}, 4, 12)]
    for built, config, settings, num_return, source_limit in cases:
        made = make_translator(built, config, **settings)
        assert (made.config.num_return, made.source_limit) == (num_return, source_limit), settings
    with pytest.raises(ValueError, match="method must be one of") as raised:
        make_translator(model, method="sample")
    assert raised.value.field == "method"
    with pytest.raises(TypeError, match="Unknown search setting"):
        make_translator(model, beams=2)


def test_export_checks_each_thing_once_and_takes_every_setting(g2p_model, tmp_path,
                                                                monkeypatch):
    """On the export path the decoding contract (`check_model`, in the
    Translator), the tokenizers (`Translator.text_tokenizers`, read by the
    serving module and by each traced signature) and the attention (before
    anything is traced) are each checked once. Any `SearchConfig` field is a
    setting (here `min_length`, which `export_translator` does not name): it
    reaches the served search and the metadata."""
    model, words = g2p_model
    calls = collections.Counter()

    def counted(name, function):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(translator, "check_model", counted("contract", translator.check_model))
    # (an export that imported check_model to check again would be counted too)
    monkeypatch.setattr(export, "check_model", counted("contract", translator.check_model),
                        raising=False)
    monkeypatch.setattr(export, "check_alignable", counted("attention", export.check_alignable))
    tokenizers = functools.cached_property(
        counted("tokenizers", translator.Translator.text_tokenizers.func))
    tokenizers.__set_name__(translator.Translator, "text_tokenizers")
    monkeypatch.setattr(translator.Translator, "text_tokenizers", tokenizers)
    settings = dict(method="greedy", max_length=6, min_length=6, jit_compile=False)
    path = export_translator(model, tmp_path / "export", alignments=True, **settings)
    assert calls == {"contract": 1, "tokenizers": 1, "attention": 1}
    # The metadata records the search, the fields the translator resolves as resolved
    # (num_beams: 1 for greedy whatever the config's field; 256 source tokens).
    metadata = read_metadata(path)
    assert (metadata["method"], metadata["num_beams"], metadata["num_return"]) == ("greedy", 1, 1)
    assert (metadata["max_length"], metadata["min_length"]) == (6, 6)
    assert metadata["max_source_length"] == 256 and metadata["jit_compile"] is False
    served = tf.saved_model.load(path).signatures[SERVING_SIGNATURE](text=tf.constant(words))
    served = [text.decode() for text in served["translation"].numpy()]
    expected = model.translate(words, **settings)
    assert served == expected and all(len(text.split()) == 6 for text in expected)
    assert expected != model.translate(words, **{**settings, "min_length": 0})


def test_model_without_tokenizers_is_rejected(tmp_path):
    model = build_rnn_seq2seq(10, 10, embedding_dim=4, units=4)
    with pytest.raises(ValueError, match="source_tokenizer"):
        export_translator(model, tmp_path / "out")


# --------------------------------------------------------------------------
# Decoders with a batch size known only at run time.
# --------------------------------------------------------------------------


def test_decoders_accept_a_dynamic_batch_size():
    toy = PrefixTableModel(batch_size=3, vocab_size=5, seed=3, end_bias=0.3)
    state = toy.initial_state()
    specs = {name: tf.TensorSpec([None] + tensor.shape[1:].as_list(), tensor.dtype)
             for name, tensor in state.items()}
    search = dict(start_id=START_ID, end_id=END_ID, max_length=5)

    @tf.function(input_signature=[specs])
    def dynamic(state):
        beam = decoding.beam_search(toy.step_fn, state, batch_size=None, num_beams=3,
                                    num_return=2, length_penalty=0.6, **search)
        greedy = decoding.greedy(toy.step_fn, state, batch_size=None, **search)
        return beam, greedy

    beam, greedy = dynamic(state)
    expected_beam = decoding.beam_search(toy.step_fn, state, 3, num_beams=3, num_return=2,
                                         length_penalty=0.6, **search)
    expected_greedy = decoding.greedy(toy.step_fn, state, 3, **search)
    for got, expected in zip(beam + greedy, expected_beam + expected_greedy, strict=True):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-5)
    empty = {name: tensor[:0] for name, tensor in state.items()}
    beam, greedy = dynamic(empty)
    assert beam[0].shape == (0, 2, 5) and greedy[0].shape == (0, 5)


# --------------------------------------------------------------------------
# Command line.
# --------------------------------------------------------------------------


def start_cli(*arguments):
    return processes.popen(
        [sys.executable, "-m", "kerasseq_cli", *arguments],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=CHILD_ENV, cwd=REPO,
    )


def finish(process):
    stdout, stderr = process.communicate(timeout=600)
    return process.returncode, stdout, stderr


# TensorFlow's and absl's own stderr lines (glog-format C++ logs, absl's
# start-up notice, Python loggers), which are not the CLI's message.
LOG_LINE = re.compile(
    r"[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] "
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|(WARNING|INFO|ERROR):(absl|tensorflow):"
)


def one_line_error(stderr, command):
    """stderr is the CLI's one-line message once TensorFlow's log lines are dropped."""
    messages = [line for line in stderr.splitlines() if line.strip() and not LOG_LINE.match(line)]
    assert len(messages) == 1, stderr[-3000:]
    assert messages[0].startswith(f"kerasseq {command}: error: "), stderr[-3000:]
    return messages[0]


def test_cli_export_and_translate_with_the_saved_model(g2p_model, tmp_path):
    model, words = g2p_model
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    model.save(model_dir / "model.keras")
    (tmp_path / "taken").mkdir()
    export_dir = tmp_path / "export"
    # Independent commands run side by side (each one imports TensorFlow).
    export = start_cli("export", str(model_dir), str(export_dir), "--beam", "1",
                       "--max-length", "6")  # greedy: the cheapest graph to trace
    taken = start_cli("export", str(model_dir), str(tmp_path / "taken"))
    missing = start_cli("export", str(tmp_path / "no_such_model"), str(tmp_path / "other"))

    code, _, stderr = finish(taken)
    assert code == 2 and "already exists" in one_line_error(stderr, "export")
    assert os.listdir(tmp_path / "taken") == []
    code, _, stderr = finish(missing)
    assert code == 2 and "no kerasseq model" in one_line_error(stderr, "export")
    assert not os.path.exists(tmp_path / "other")

    code, stdout, stderr = finish(export)
    assert code == 0, stderr[-3000:]
    assert "exported" in stdout
    assert os.path.isfile(export_dir / "saved_model.pb")
    metadata = read_metadata(str(export_dir))
    assert (metadata["method"], metadata["num_return"], metadata["max_length"]) == ("greedy", 1, 6)
    # `kerasseq translate` serves the export the command wrote.
    code, stdout, stderr = finish(start_cli("translate", str(export_dir), words[0], words[1]))
    assert code == 0, stderr[-3000:]
    expected = model.translate(words[:2], method="greedy", max_length=6)
    assert len(set(expected)) == 2, expected
    assert stdout.splitlines() == [f"{words[0]}\t{expected[0]}", f"{words[1]}\t{expected[1]}"]
