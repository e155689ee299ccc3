"""Tests for `kerasseq.export.export_ctranslate2` and `CTranslate2Translator`.

The reference is kerasseq itself: the teacher-forced model (per-token
log-probabilities) and `model.translate` (greedy and beam search), on
untrained Transformers of every variant (post- and pre-norm, separate,
shared and tied embeddings) and on one Transformer trained briefly on the
tiny G2P task, where kerasseq's and CTranslate2's beam searches finish the
same hypotheses.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

ctranslate2 = pytest.importorskip("ctranslate2", reason="pip install -e '.[ctranslate2]'")

from kerasseq import _ctranslate2  # noqa: E402
from kerasseq.data import TextTokenizer, load_cmudict  # noqa: E402
from kerasseq.export import (  # noqa: E402
    CTranslate2Translator,
    export_ctranslate2,
    export_translator,
    is_ctranslate2_model,
)
from kerasseq.models import Ensemble, build_rnn_seq2seq, build_transformer_seq2seq  # noqa: E402
from kerasseq_cli import main  # noqa: E402
from tests.models.g2p_fixture import tiny_g2p, tiny_g2p_model, train_on_tiny_g2p  # noqa: E402

SMALL = dict(num_layers=2, d_model=32, num_heads=4, dff=64, dropout=0.0, max_positions=16,
             max_target_length=12)
VARIANTS = {
    "post_norm": dict(),
    "pre_norm": dict(norm_first=True),
    "tied": dict(tie_output=True),
    "shared_tied_pre_norm": dict(share_embeddings=True, tie_output=True, norm_first=True),
}
# Each variant's mapping is covered by `shared_tied_pre_norm` and `post_norm`;
# the two single-change variants repeat it (the slow tier).
SLOW_VARIANTS = ("pre_norm", "tied")


def words():
    return [word for word, _ in tiny_g2p()[0]]


def dev_words(count=40):
    """Words the tiny model never saw (unknown characters included)."""
    return [word for word, _ in load_cmudict("dev")[:400] if 3 <= len(word) <= 9][:count]


def build(variant, seed=0):
    settings = {**SMALL, **VARIANTS[variant]}
    if settings.get("share_embeddings"):  # one vocabulary for both sides
        _, pairs, _, _ = tiny_g2p()
        shared = TextTokenizer.from_texts([text for pair in pairs for text in pair],
                                          split="character")
        import keras

        keras.utils.set_random_seed(seed)
        return build_transformer_seq2seq(source_tokenizer=shared, target_tokenizer=shared,
                                         **settings)
    return tiny_g2p_model(build_transformer_seq2seq, seed, **settings)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A post-norm Transformer trained on the 30 words, and its CTranslate2 export."""
    model, _ = train_on_tiny_g2p(build("post_norm"), 25, learning_rate=1e-2)
    path = str(tmp_path_factory.mktemp("ct2") / "trained")
    export_ctranslate2(model, path)
    return model, path


def teacher_forced_log_probs(model, source_ids, targets):
    """log P(y_t | y_<t, x) of every target token and the end token, per row."""
    length = max(len(target) for target in targets) + 1
    target_in = np.zeros((len(targets), length), np.int32)
    target_out = np.zeros((len(targets), length), np.int32)
    for row, target in enumerate(targets):
        target_in[row, :len(target) + 1] = [2, *target]
        target_out[row, :len(target) + 1] = [*target, 3]
    log_probs = tf.nn.log_softmax(model([source_ids, target_in])).numpy()
    return [log_probs[row, np.arange(len(target) + 1), target_out[row, :len(target) + 1]]
            for row, target in enumerate(targets)]


@pytest.mark.parametrize("variant", [
    pytest.param(name, marks=pytest.mark.slow) if name in SLOW_VARIANTS else name
    for name in VARIANTS])
def test_every_variant_scores_and_decodes_as_kerasseq(variant, tmp_path):
    model = build(variant)
    path = export_ctranslate2(model, tmp_path / variant)
    assert is_ctranslate2_model(path)
    translator = CTranslate2Translator(path, method="greedy")
    texts = words()[:12]
    # Greedy: the same tokens (untrained: every output runs to max_length or
    # ends early, both covered) and log P(Y | X).
    expected, expected_scores = model.translate(texts, method="greedy", return_scores=True)
    found, scores = translator.translate(texts, return_scores=True)
    assert found == expected
    # CTranslate2's bans ([PAD], [START]: suppress_sequences) renormalise the
    # other tokens, kerasseq's do not (fairseq's rule): its scores are higher by
    # the banned mass, which an untrained model makes large (docs/export.md).
    assert np.all(np.asarray(scores) >= np.asarray(expected_scores) - 1e-5)
    # Per-token log-probabilities of the same targets (end token included).
    tokens = translator.source_tokens(texts)
    vocabulary = model.target_tokenizer.get_vocabulary()
    targets = [[vocabulary[index] for index in model.target_tokenizer.encode(text).numpy()]
               for text in expected]
    scored = translator.translator.score_batch(tokens, targets)
    source_ids = model.source_tokenizer.encode(texts).to_tensor().numpy()
    reference = teacher_forced_log_probs(model, source_ids, [translator.target_ids(target)
                                                             for target in targets])
    for result, log_probs in zip(scored, reference, strict=True):
        np.testing.assert_allclose(result.log_probs, log_probs, atol=1e-5)


def assert_renormalised_scores(found, expected, most=0.05):
    """CTranslate2's bans ([PAD], [START]) renormalise the other tokens and
    kerasseq's do not (fairseq's rule, docs/export.md): for a trained model,
    which gives those ids little probability, its scores are higher by a
    little, never lower."""
    difference = np.asarray(found) - np.asarray(expected)
    assert np.all(difference >= -1e-5) and np.all(difference < most), difference


def test_vocabularies_map_every_id_and_the_special_tokens(tmp_path):
    model = build("post_norm")
    path = export_ctranslate2(model, tmp_path / "export")
    for side in ("source", "target"):
        with open(os.path.join(path, f"{side}_vocabulary.json"), encoding="utf-8") as handle:
            assert json.load(handle) == getattr(model, f"{side}_tokenizer").get_vocabulary()
    with open(os.path.join(path, "config.json"), encoding="utf-8") as handle:
        config = json.load(handle)
    assert (config["unk_token"], config["bos_token"], config["eos_token"],
            config["decoder_start_token"]) == ("[UNK]", "[START]", "[END]", "[START]")
    assert not config["add_source_bos"] and not config["add_source_eos"]
    assert config["layer_norm_epsilon"] == pytest.approx(model.layer_norm_epsilon)


def test_trained_model_greedy_and_beam_identical(trained):
    """Greedy on any word; beam search (length penalty 0) on the words the model
    learned, where its end token never competes from ranks k+1..2k of the 2k
    candidates, the one case where the two searches finish hypotheses
    differently (docs/export.md, "CTranslate2"; the lower hypotheses of an
    n-best list often differ for that reason)."""
    model, path = trained
    for texts, settings in ((words() + dev_words(), dict(method="greedy")),
                            (words(), dict(num_beams=4, length_penalty=0.0))):
        expected, expected_scores = model.translate(texts, return_scores=True, **settings)
        found, scores = CTranslate2Translator(path, **settings).translate(
            texts, return_scores=True)
        assert found == expected, settings
        assert_renormalised_scores(scores, expected_scores)


def test_defaults_are_kerasseqs_beam_4(trained):
    model, path = trained
    translator = CTranslate2Translator(path)
    assert translator.options["beam_size"] == 4 and translator.options["length_penalty"] == 0.0
    assert translator.max_length == model.max_target_length
    assert translator.translate(words()[:10]) == model.translate(words()[:10])
    assert translator.translate(words()[0]) == model.translate(words()[0])


def test_blank_and_unknown_texts(trained):
    model, path = trained
    translator = CTranslate2Translator(path, num_beams=2, num_return=2)
    texts = ["", " \t", words()[0], "ß☃q"]
    found, scores = translator.translate(texts, return_scores=True)
    expected, expected_scores = model.translate(texts, return_scores=True, num_beams=2,
                                                num_return=2)
    assert found[:2] == expected[:2] == [["", ""], ["", ""]] and scores[1] == [0.0, 0.0]
    # The second hypothesis of a real text may differ: CTranslate2 finishes a
    # hypothesis only if it ranks in the top k of the 2k candidates (docs/export.md).
    assert [hyps[0] for hyps in found[2:]] == [hyps[0] for hyps in expected[2:]]
    assert_renormalised_scores([s[0] for s in scores[2:]], [s[0] for s in expected_scores[2:]])


def test_long_sources_are_cut_to_the_position_table(trained):
    model, path = trained
    long_word = "abcdefghij" * 5
    translator = CTranslate2Translator(path, method="greedy")
    assert len(translator.source_tokens([long_word])[0]) == SMALL["max_positions"]
    assert translator.translate(long_word) == model.translate(long_word, method="greedy",
                                                              max_source_length=16)


def stored_weights(path):
    """`{name: (dtype, shape, bytes)}` of a CTranslate2 `model.bin` (its binary
    layout: CTranslate2's `ModelSpec._serialize`)."""
    with open(os.path.join(path, "model.bin"), "rb") as handle:
        data = handle.read()
    offset = 0

    def take(size):
        nonlocal offset
        offset += size
        return data[offset - size:offset]

    def number(code, size):
        return int(np.frombuffer(take(size), {"I": np.uint32, "H": np.uint16, "B": np.uint8}[code])[0])

    def string():
        return take(number("H", 2))[:-1].decode("utf-8")

    number("I", 4), string(), number("I", 4)  # binary version, spec name, revision
    weights = {}
    for _ in range(number("I", 4)):
        name = string()
        shape = tuple(number("I", 4) for _ in range(number("B", 1)))
        dtype = ("float32", "int8", "int16", "int32", "float16", "bfloat16")[number("B", 1)]
        weights[name] = (dtype, shape, take(number("I", 4)))
    return weights


def test_int8_export_stores_each_matrix_as_int8_rows_with_a_scale(trained, tmp_path):
    model, path = trained
    quantized = export_ctranslate2(model, tmp_path / "int8", quantization="int8")
    floats, int8 = stored_weights(path), stored_weights(quantized)
    name = "decoder/layer_0/ffn/linear_0/weight"
    assert floats[name][0] == "float32" and int8[name][0] == "int8"
    # CTranslate2's int8: each row scaled by 127 / max |row|, rounded.
    kernel = model.decoder_blocks[0].feed_forward.intermediate_dense.kernel.numpy().T
    scale = 127.0 / np.abs(kernel).max(axis=1)
    values = np.frombuffer(int8[name][2], np.int8).reshape(int8[name][1])
    np.testing.assert_array_equal(values, np.rint(kernel * scale[:, None]).astype(np.int8))
    np.testing.assert_allclose(np.frombuffer(int8[name + "_scale"][2], np.float32), scale,
                               rtol=1e-6)
    assert os.path.getsize(os.path.join(quantized, "model.bin")) < 0.6 * os.path.getsize(
        os.path.join(path, "model.bin"))
    found = CTranslate2Translator(quantized, method="greedy").translate(words()[:4])
    assert all(isinstance(text, str) and text for text in found)


@pytest.mark.parametrize("settings, field", [
    (dict(method="sample"), "method"), (dict(coverage_penalty=0.2), "coverage_penalty"),
    (dict(max_length_a=1.5), "max_length_a"), (dict(max_length=17), "max_length"),
])
def test_settings_without_a_ctranslate2_equivalent_are_refused(trained, settings, field):
    _, path = trained
    with pytest.raises(ValueError, match=field) as raised:
        CTranslate2Translator(path, **settings)
    assert raised.value.field == field


def test_what_cannot_be_exported_is_refused_before_anything_is_written(tmp_path):
    rnn = tiny_g2p_model(build_rnn_seq2seq, 0, embedding_dim=8, units=8)
    transformer = build("post_norm")
    for model, message in ((rnn, "Transformers .* only. Received: a RNNSeq2Seq"),
                           (Ensemble([transformer, build("post_norm", seed=1)]), "Ensemble")):
        with pytest.raises(ValueError, match=message):
            export_ctranslate2(model, tmp_path / "out")
    with pytest.raises(ValueError, match="quantization must be None or one of"):
        export_ctranslate2(transformer, tmp_path / "out", quantization="int4")
    bare = build_transformer_seq2seq(20, 20, **SMALL)
    with pytest.raises(ValueError, match="source_tokenizer"):
        export_ctranslate2(bare, tmp_path / "out")
    assert os.listdir(tmp_path) == []


def test_export_replaces_only_a_ctranslate2_export_or_an_empty_directory(tmp_path, monkeypatch):
    model = build("post_norm")
    path = tmp_path / "export"
    path.mkdir()
    export_ctranslate2(model, path)
    with pytest.raises(FileExistsError, match="already exists"):
        export_ctranslate2(model, path, overwrite=False)
    export_ctranslate2(model, path, quantization="int8")  # replaces the earlier export
    assert json.loads((path / "kerasseq_ctranslate2.json").read_text())["quantization"] == "int8"
    saved_model = tmp_path / "saved_model"
    export_translator(model, saved_model, method="greedy")
    with pytest.raises(FileExistsError, match="CTranslate2 model directory"):
        export_ctranslate2(model, saved_model)
    with pytest.raises(FileExistsError, match="SavedModel directory"):
        export_translator(model, path)

    def fail(*args):
        raise RuntimeError("disk full")

    before = sorted(os.listdir(path))
    monkeypatch.setattr(_ctranslate2, "write_model", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        export_ctranslate2(model, path)
    assert sorted(os.listdir(path)) == before
    assert sorted(os.listdir(tmp_path)) == ["export", "saved_model"]


def test_cli_exports_and_translates_a_ctranslate2_directory(trained, tmp_path, capsys):
    model, _ = trained
    model_path = str(tmp_path / "model.keras")
    model.save(model_path)
    export_dir = str(tmp_path / "ct2")
    assert main(["export", model_path, export_dir, "--format", "ctranslate2",
                 "--quantization", "float32"]) == 0
    assert "CTranslate2" in capsys.readouterr().out
    texts = words()[:6]
    assert main(["translate", export_dir, *texts, "--beam", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = model.translate(texts, num_beams=2)
    assert lines == [f"{text}\t{translation}" for text, translation in
                     zip(texts, expected, strict=True)]
    for args, message in (
            (["export", model_path, str(tmp_path / "x"), "--format", "ctranslate2", "--beam", "2"],
             "--beam: a CTranslate2 export stores no search settings"),
            (["export", model_path, str(tmp_path / "x"), "--quantization", "int8"],
             "--quantization applies to --format ctranslate2"),
            (["translate", export_dir, "cat", "--alignments"], "--alignments needs"),
            (["translate", export_dir, "cat", "--beam", "2", "--nbest", "3"], "--nbest"),
    ):
        assert main(args) == 2, args
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1 and message in error[0], (args, error)
    assert not os.path.exists(tmp_path / "x")


@pytest.mark.slow  # a benchmark script, run on the trained model and 40 test words
def test_quality_benchmark_reports_the_scores_of_the_outputs_it_writes(trained, tmp_path,
                                                                         capsys):
    import importlib.util

    from kerasseq.evaluation import g2p_error_rates

    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "benchmarks", "ctranslate2_quality.py")
    spec = importlib.util.spec_from_file_location("ctranslate2_quality", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model_path, out, outputs = (str(tmp_path / name) for name in
                                ("model.keras", "quality.json", "outputs.tsv"))
    trained[0].save(model_path)
    record = module.main(["--task", "g2p", model_path, "--length-penalty", "0", "--kerasseq",
                          "--limit", "40", "--out", out, "--outputs", outputs])
    assert json.loads(open(out, encoding="utf-8").read()) == json.loads(json.dumps(record))
    header, *lines = open(outputs, encoding="utf-8").read().splitlines()
    engines = header.split("\t")[1:]
    assert engines == ["ctranslate2 float32", "ctranslate2 int8", "kerasseq Translator"]
    test = load_cmudict("test")[:40]
    assert [line.split("\t")[0] for line in lines] == [word for word, _ in test]
    for column, engine in enumerate(engines, start=1):
        texts = [line.split("\t")[column] for line in lines]
        rates = g2p_error_rates(texts, [pronunciations for _, pronunciations in test])
        row = record["rows"][engine]
        assert row["wer"] == pytest.approx(100 * rates["wer"])
        assert row["per"] == pytest.approx(100 * rates["per"])
        float32 = [line.split("\t")[1] for line in lines]
        assert row["same_as_ctranslate2_float32"] == pytest.approx(
            sum(a == b for a, b in zip(texts, float32, strict=True)) / 40)
    assert record["int8_wer_change"] == pytest.approx(
        record["rows"]["ctranslate2 int8"]["wer"] - record["rows"]["ctranslate2 float32"]["wer"])
    assert "int8 against float32" in capsys.readouterr().out
