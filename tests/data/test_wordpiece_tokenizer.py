"""Tests for `kerasseq.data.WordPieceTextTokenizer` (kerasseq/data/wordpiece_tokenizer.py).

References are independent of the class: keras-hub's `WordPieceTokenizer`
run on its own (Python path, string pieces) for the ids, hand-written pieces
and texts for detokenization, and a SavedModel served in a process where
kerasseq cannot be imported.
"""

import json
import os
import subprocess
import sys

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

import kerasseq
from kerasseq.data import (
    END_ID,
    PAD_ID,
    RESERVED_TOKENS,
    START_ID,
    UNK_ID,
    TextTokenizer,
    WordPieceTextTokenizer,
    make_dataset,
)
from kerasseq.export import export_translator
from kerasseq.models import build_rnn_seq2seq, build_transformer_seq2seq
from kerasseq.training import MaskedSparseCategoricalCrossentropy

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PAIRS = [
    ("Ich habe keine Zeit.", "I have no time."),
    ("Das ist gut!", "That is good!"),
    ("Ich bin hier.", "I am here."),
    ("Das Haus ist alt.", "The house is old."),
    ("Wir haben Zeit.", "We have time."),
    ("Ist das Haus gut?", "Is the house good?"),
]
# Texts whose spacing is the usual one, so text -> ids -> text gives them back.
NORMAL_TEXTS = [
    "i don't think so, really.",
    "das ist eine ablösung!",
    "(ca. 3.5 kg) well-known: yes?",
    "it's 12:30, time to go...",
]

# Runs in `python -I`: drops the editable-install finder and every sys.path
# entry holding a `kerasseq` package, checks that `import kerasseq` fails,
# shows that the export needs TensorFlow Text's ops, then loads and serves it.
SERVE_WITH_TENSORFLOW_TEXT = r"""
import json, os, sys

editable = lambda hook: "__editable__" in (getattr(hook, "__module__", None) or "")
sys.meta_path[:] = [finder for finder in sys.meta_path if not editable(finder)]
sys.path_hooks[:] = [hook for hook in sys.path_hooks if not editable(hook)]
sys.path_importer_cache.clear()
sys.path[:] = [e for e in sys.path if not os.path.isdir(os.path.join(e or ".", "kerasseq"))]
try:
    import kerasseq
except ImportError:
    pass
else:
    raise SystemExit("isolation failed: kerasseq imported from " + kerasseq.__file__)

import tensorflow as tf

export_dir, texts = json.load(sys.stdin)
try:
    tf.saved_model.load(export_dir)
    error_without_text = ""
except Exception as error:
    error_without_text = str(error).splitlines()[0]
import tensorflow_text  # registers the TFText ops

translator = tf.saved_model.load(export_dir)
outputs = translator.signatures["serving_default"](text=tf.constant(texts, tf.string))
print("RESULTS " + json.dumps({
    "error_without_tensorflow_text": error_without_text,
    "translation": [t.decode("utf-8") for t in outputs["translation"].numpy()],
    "score": outputs["score"].numpy().tolist(),
    "kerasseq_imported": "kerasseq" in sys.modules,
}))
"""


@pytest.fixture(scope="module")
def tokenizers():
    source = WordPieceTextTokenizer.from_texts([s for s, _ in PAIRS], lowercase=True,
                                               name="source_tokenizer")
    target = WordPieceTextTokenizer.from_texts([t for _, t in PAIRS], lowercase=True,
                                               name="target_tokenizer")
    return source, target


@pytest.fixture(scope="module")
def trained_model(tokenizers):
    """A tiny attention RNN trained for 60 steps on the six pairs (10 per epoch)."""
    keras.utils.set_random_seed(3)
    source, target = tokenizers
    model = build_rnn_seq2seq(embedding_dim=16, units=32, max_target_length=20,
                              source_tokenizer=source, target_tokenizer=target)
    model.compile(optimizer=keras.optimizers.Adam(2e-2, clipnorm=1.0),
                  loss=MaskedSparseCategoricalCrossentropy(), jit_compile=False)
    model.fit(make_dataset(PAIRS * 10, source, target, batch_size=6, seed=0), epochs=6,
              verbose=0)
    return model


def keras_hub_reference(pieces, texts, lowercase):
    """kerasseq ids computed by keras-hub alone: its pure-Python WordPiece path
    with string output, mapped through `RESERVED_TOKENS + pieces`."""
    reference = keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=list(pieces) + ["[UNK]"], lowercase=lowercase, oov_token="[UNK]",
        dtype="string",
    )
    index = {piece: i + len(RESERVED_TOKENS) for i, piece in enumerate(pieces)}
    index["[UNK]"] = UNK_ID
    rows = reference.tokenize(texts)
    return [[index[p.decode() if isinstance(p, bytes) else p] for p in row] for row in rows]


# --------------------------------------------------------------------------
# Ids.
# --------------------------------------------------------------------------


def test_reserved_ids_and_vocabulary():
    tokenizer = WordPieceTextTokenizer(["the", "cat", "sat", "s", "##at", "##s"])
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.start_id, tokenizer.end_id) == (
        PAD_ID, UNK_ID, START_ID, END_ID) == (0, 1, 2, 3)
    assert tokenizer.get_vocabulary() == [*RESERVED_TOKENS, "the", "cat", "sat", "s", "##at", "##s"]
    assert tokenizer.vocabulary == ["the", "cat", "sat", "s", "##at", "##s"]
    assert tokenizer.vocabulary_size == 10
    # "cats" = cat ##s; "." and "dog" cannot be spelled: one [UNK] each.
    assert tokenizer.encode(["the cats sat.", "the dog"]).to_list() == [[4, 5, 9, 6, 1], [4, 1]]
    assert tokenizer.tokenize(["the cats"]).to_list() == [[b"the", b"cat", b"##s"]]
    ids = tokenizer.encode("the cats")  # a scalar gives a dense (length,) tensor
    assert isinstance(ids, tf.Tensor) and ids.dtype == tf.int32
    np.testing.assert_array_equal(ids.numpy(), [4, 5, 9])
    assert tokenizer(tf.constant(["sat"])).to_list() == [[6]]  # the layer call


def test_ids_equal_keras_hub_shifted_by_the_reserved_ids(tokenizers):
    source, target = tokenizers
    texts = [s for s, _ in PAIRS] + ["Größe: 3,5 Häuser?", "unbekannt ☃", ""]
    assert source.encode(texts).to_list() == keras_hub_reference(source.vocabulary, texts, True)
    english = [t for _, t in PAIRS] + ["Is it good, or not?"]
    assert target.encode(english).to_list() == keras_hub_reference(target.vocabulary, english, True)
    # Ids 0, 2 and 3 never come out of encode: they are kerasseq's, not text.
    flat = np.concatenate([row for row in source.encode(texts + ["[PAD] [START] [END]"]).to_list()
                           if row])
    assert not np.isin(flat, [PAD_ID, START_ID, END_ID]).any()


def test_adapt_learns_pieces_deterministically_and_respects_max_tokens():
    texts = ["Ablösung Lösung Lösungen lösen", "Zeitung Zeit Zeiten"] * 3
    first = WordPieceTextTokenizer.from_texts(texts, max_tokens=40)
    again = WordPieceTextTokenizer().adapt(tf.data.Dataset.from_tensor_slices(texts).batch(4),
                                           max_tokens=40)
    assert first.vocabulary == again.vocabulary
    assert first.vocabulary_size <= 40
    # Every character of the texts, and longer pieces where they pay ("##ösung").
    assert {"L", "Z", "ö", "##ö"} <= set(first.vocabulary)  # case kept by default
    assert any(len(piece.removeprefix("##")) > 1 for piece in first.vocabulary)
    assert UNK_ID not in first.encode(texts).flat_values.numpy()
    # A vocabulary learned with lowercase=True holds no capitals, and encode folds case too.
    lower = WordPieceTextTokenizer.from_texts(texts, max_tokens=40, lowercase=True)
    assert all(piece == piece.lower() for piece in lower.vocabulary)
    assert lower.encode(["LÖSUNG"]).to_list() == lower.encode(["lösung"]).to_list()
    assert UNK_ID not in lower.encode(["Lösungen"]).to_list()[0]


def test_max_length_keeps_the_first_pieces():
    full = WordPieceTextTokenizer(["a", "b", "##b"])
    cut = WordPieceTextTokenizer(["a", "b", "##b"], max_length=2)
    assert full.encode(["a bbb a"]).to_list() == [[4, 5, 6, 6, 4]]
    assert cut.encode(["a bbb a"]).to_list() == [[4, 5]]


# --------------------------------------------------------------------------
# Ids -> text.
# --------------------------------------------------------------------------


def test_round_trip_text_ids_text():
    tokenizer = WordPieceTextTokenizer.from_texts(NORMAL_TEXTS)
    ids = tokenizer.encode(NORMAL_TEXTS)
    assert tokenizer.decode_to_strings(ids) == NORMAL_TEXTS
    assert tokenizer.decode_to_strings(ids.to_tensor()) == NORMAL_TEXTS


def test_detokenize_glues_pieces_and_follows_text_tokenizer_rules():
    tokenizer = WordPieceTextTokenizer(["ab", "##lös", "##ung", "i", "don", "'", "t", ".", ","])
    ab, los, ung, i, don, quote, t, stop, comma = range(4, 13)
    ids = tf.constant([
        [START_ID, ab, los, ung, stop, END_ID, ab, ab],  # stops at the first [END]
        [i, don, quote, t, comma, UNK_ID, 99, PAD_ID],  # unknown ids read [UNK]
        [los, ung, END_ID, 0, 0, 0, 0, 0],  # a leading continuation piece
        [END_ID, ab, 0, 0, 0, 0, 0, 0],
    ])
    assert tokenizer.decode_to_strings(ids) == [
        "ablösung.", "i don't, [UNK] [UNK]", "lösung", ""]
    assert tokenizer.detokenize(tf.constant([ab, ung, END_ID])).numpy().decode() == "abung"
    # The same rule set as TextTokenizer for what is printed.
    words = TextTokenizer(["ab", "##lös"], split="whitespace")
    assert words.decode_to_strings([[START_ID, 4, 5, END_ID, 4]]) == ["ab ##lös"]


TYPOGRAPHIC_TEXTS = [
    "God said, “Let there be light!” And there was light.",
    "He said, ‘Listen to me.’ Then he left.",
    "«Vete», dijo él. ¿Qué haces? ¡Ven acá!",
    "Peter’s feet (all ten toes) were washed; “Why?” asked Peter.",
]


@pytest.fixture(scope="module")
def typographic_tokenizer():
    # One vocabulary learned on all four texts (learning one costs ~1.5 CPU-s):
    # it spells every word of each, as one learned on that text alone did.
    return WordPieceTextTokenizer.from_texts(TYPOGRAPHIC_TEXTS, max_tokens=400)


@pytest.mark.parametrize("text", TYPOGRAPHIC_TEXTS)
def test_detokenize_spaces_typographic_quotes_like_punctuation(text, typographic_tokenizer):
    # A vocabulary learned on the texts spells every word; the tokenizer splits
    # off every mark, and detokenize must put the original spacing back.
    tokenizer = typographic_tokenizer
    assert "[UNK]" not in [piece.decode() for piece in tokenizer.tokenize(text).numpy()]
    assert tokenizer.decode_to_strings([tokenizer.encode(text).numpy().tolist()]) == [text]


def test_detokenize_quote_rules_by_hand():
    tokenizer = WordPieceTextTokenizer(["let", "there", "be", "light", "!", "“", "”", "¿", "?",
                                        "qué", "«", "»", "‘", "’", "no"])
    let, there, be, light, bang, open_, close, inv, question, que, lg, rg, lsq, rsq, no = range(
        4, 19)
    assert tokenizer.decode_to_strings([
        [open_, let, there, be, light, bang, close],
        [inv, que, question, lg, no, rg],
        [no, lsq, no, rsq],
    ]) == ["“let there be light!”", "¿qué? «no»", "no ‘no’"]


def test_inside_tf_function_and_tf_data(tokenizers):
    source, _ = tokenizers
    texts = [s for s, _ in PAIRS]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(batch):
        ids = source.encode(batch).to_tensor()
        return ids, source.detokenize(ids)

    ids, decoded = round_trip(tf.constant(texts))
    np.testing.assert_array_equal(ids.numpy(), source.encode(texts).to_tensor().numpy())
    assert [text.decode() for text in decoded.numpy()] == [text.lower() for text in texts]
    mapped = tf.data.Dataset.from_tensor_slices(texts).map(source.encode)
    assert [row.numpy().tolist() for row in mapped] == source.encode(texts).to_list()


# --------------------------------------------------------------------------
# Saving.
# --------------------------------------------------------------------------


def test_config_round_trip(tokenizers):
    source, _ = tokenizers
    config = source.get_config()
    assert (config["vocabulary"], config["lowercase"], config["strip_accents"],
            config["max_length"]) == (source.vocabulary, True, False, None)
    clone = WordPieceTextTokenizer.from_config(config)
    texts = [s for s, _ in PAIRS]
    assert clone.encode(texts).to_list() == source.encode(texts).to_list()
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(source))
    assert isinstance(restored, WordPieceTextTokenizer) and restored.get_config() == config
    assert WordPieceTextTokenizer.from_config(WordPieceTextTokenizer().get_config()).vocabulary is None


def test_keras_file_round_trip_inside_a_model(tmp_path, trained_model):
    path = str(tmp_path / "wordpiece.keras")
    trained_model.save(path)
    loaded = keras.models.load_model(path)
    texts = [s for s, _ in PAIRS] + ["Größe?"]
    for original, restored in ((trained_model.source_tokenizer, loaded.source_tokenizer),
                               (trained_model.target_tokenizer, loaded.target_tokenizer)):
        assert isinstance(restored, WordPieceTextTokenizer)
        assert restored.encode(texts).to_list() == original.encode(texts).to_list()
        assert restored.get_config() == original.get_config()


# --------------------------------------------------------------------------
# Translation and export.
# --------------------------------------------------------------------------


def test_translate_through_the_one_inference_path(trained_model):
    sources = [s for s, _ in PAIRS]
    translations = trained_model.translate(sources, method="greedy", jit_compile=False)
    # The same as the id-level pipeline: encode, greedy search, detokenize.
    source_ids = trained_model.source_tokenizer.encode(sources).to_tensor().numpy()
    token_ids, _, _ = trained_model.generate(source_ids, method="greedy", jit_compile=False)
    assert token_ids.shape[1] == 1  # (rows, num_return=1, max_length)
    assert translations == trained_model.target_tokenizer.decode_to_strings(token_ids[:, 0])
    assert kerasseq.translate(trained_model, sources, method="greedy",
                              jit_compile=False) == translations
    # 60 steps on six pairs: most training pairs come back (readable, lower-cased).
    correct = sum(hyp == ref.lower() for hyp, ref in zip(translations, [t for _, t in PAIRS],
                                                          strict=True))
    assert correct >= 4, translations
    assert trained_model.translate(["", "  "], jit_compile=False) == ["", ""]


def test_transformer_takes_wordpiece_tokenizers(tokenizers):
    keras.utils.set_random_seed(0)
    source, target = tokenizers
    model = build_transformer_seq2seq(num_layers=1, d_model=16, num_heads=2, dff=32,
                                      max_positions=32, source_tokenizer=source,
                                      target_tokenizer=target)
    translations = model.translate([s for s, _ in PAIRS[:2]], num_beams=2, max_length=6,
                                   jit_compile=False)
    assert len(translations) == 2 and all(isinstance(text, str) for text in translations)


@pytest.mark.slow
def test_export_loads_and_translates_with_tensorflow_text_and_without_kerasseq(
        tmp_path, trained_model):
    sources = [s for s, _ in PAIRS] + ["", "Größe ☃"]
    export_dir = export_translator(trained_model, tmp_path / "export", num_beams=2,
                                   jit_compile=False)
    completed = subprocess.run(
        [sys.executable, "-I", "-c", SERVE_WITH_TENSORFLOW_TEXT],
        input=json.dumps([export_dir, sources]), capture_output=True, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, cwd=str(tmp_path), timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    line = [row for row in completed.stdout.splitlines() if row.startswith("RESULTS ")]
    assert line, completed.stdout[-2000:] + completed.stderr[-2000:]
    served = json.loads(line[-1][len("RESULTS "):])
    assert served["kerasseq_imported"] is False
    # The ops live in tensorflow_text: plain TensorFlow cannot load the export.
    assert "Op type not registered" in served["error_without_tensorflow_text"]
    expected, scores = trained_model.translate(sources, num_beams=2, return_scores=True,
                                               jit_compile=False)
    assert served["translation"] == expected
    np.testing.assert_allclose(served["score"], scores, atol=1e-4)


# --------------------------------------------------------------------------
# The command line.
# --------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_trains_and_translates_with_wordpiece(tmp_path, capsys):
    from kerasseq_cli import main
    from kerasseq_cli.commands import load_model

    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{s}\t{t}\n" for s, t in PAIRS * 4), encoding="utf-8")
    output = str(tmp_path / "run")
    assert main(["train", "--dataset", f"tsv:{data}", "--tokenizer", "wordpiece",
                 "--vocabulary-size", "60", "--epochs", "1", "--embedding-dim", "8",
                 "--units", "16", "--verbose", "0", "--output-dir", output]) == 0
    model = load_model(output)
    assert isinstance(model.source_tokenizer, WordPieceTextTokenizer)
    assert isinstance(model.target_tokenizer, WordPieceTextTokenizer)
    assert model.source_tokenizer.vocabulary_size <= 60
    capsys.readouterr()
    assert main(["translate", output, "Ich habe Zeit.", "--beam", "1", "--jit", "off"]) == 0
    assert capsys.readouterr().out.startswith("Ich habe Zeit.\t")
    assert main(["train", "--dataset", f"tsv:{data}", "--tokenizer", "wordpiece",
                 "--vocabulary-size", "4", "--output-dir", str(tmp_path / "bad")]) == 2
    assert "--vocabulary-size: vocabulary_size must be > 4" in capsys.readouterr().err


# --------------------------------------------------------------------------
# Errors.
# --------------------------------------------------------------------------


@pytest.mark.parametrize("vocabulary, message", [
    ([], "at least one piece"),
    ("abc", "must be a list of str"),
    (7, "must be a list of str"),
    (["a", 3], "only str.*int"),
    (["a", "[UNK]"], "reserved"),
    (["a", "b", "a"], "duplicate.*'a'"),
    (["a", ""], "non-empty"),
    (["a b"], "no whitespace"),
    (["##"], "suffix indicator"),
])
def test_bad_vocabulary(vocabulary, message):
    with pytest.raises(ValueError, match=message):
        WordPieceTextTokenizer(vocabulary)


def test_bad_arguments_and_inputs():
    tokenizer = WordPieceTextTokenizer(["a"])
    with pytest.raises(ValueError, match="no vocabulary yet.*adapt"):
        WordPieceTextTokenizer().encode(["a"])
    with pytest.raises(ValueError, match="texts.*strings"):
        tokenizer.encode(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="texts"):
        tokenizer.encode([1, 2])
    with pytest.raises(ValueError, match="scalar string or a 1-D batch"):
        tokenizer.encode(tf.constant([["a", "b"], ["c", "d"]]))
    with pytest.raises(ValueError, match="ids.*integers"):
        tokenizer.detokenize(tf.constant([[4.0]]))
    with pytest.raises(ValueError, match="max_tokens.*> 4.*Received: max_tokens=4"):
        WordPieceTextTokenizer().adapt(["a"], max_tokens=4)
    with pytest.raises(ValueError, match="max_tokens"):
        WordPieceTextTokenizer().adapt(["a"], max_tokens="100")
    with pytest.raises(ValueError, match="no piece.*no word"):
        WordPieceTextTokenizer().adapt([])
    with pytest.raises(ValueError, match="no piece.*no word"):
        WordPieceTextTokenizer().adapt(["  ", "\n"])
    with pytest.raises(ValueError, match="texts.*only str.*int"):
        WordPieceTextTokenizer().adapt(["a", 5])
    with pytest.raises(ValueError, match="texts.*Received: int"):
        WordPieceTextTokenizer().adapt(5)
    with pytest.raises(ValueError, match="lowercase.*True or False"):
        WordPieceTextTokenizer(lowercase="yes")
    with pytest.raises(ValueError, match="strip_accents.*True or False"):
        WordPieceTextTokenizer(strip_accents=1)
    with pytest.raises(ValueError, match="max_length.*Received: max_length=0"):
        WordPieceTextTokenizer(max_length=0)


# What `keras.saving.serialize_keras_object` wrote for a WordPieceTextTokenizer
# before the tokenizers shared `TokenizerBase` (issue 24): it must still load.
SAVED_BEFORE_THE_SHARED_BASE = {
    "module": "kerasseq.data.wordpiece_tokenizer", "class_name": "WordPieceTextTokenizer",
    "config": {"name": "wp", "trainable": True,
               "dtype": {"module": "keras", "class_name": "DTypePolicy",
                         "config": {"name": "float32"}, "registered_name": None},
               "vocabulary": ["the", "cat", "sat", "s", "##at", "##s"], "lowercase": True,
               "strip_accents": False, "max_length": 9},
    "registered_name": "kerasseq>WordPieceTextTokenizer",
}


def test_a_config_written_before_the_shared_base_still_loads():
    from kerasseq.data.tokenizer import TokenizerBase

    loaded = keras.saving.deserialize_keras_object(SAVED_BEFORE_THE_SHARED_BASE)
    assert isinstance(loaded, WordPieceTextTokenizer) and isinstance(loaded, TokenizerBase)
    assert (loaded.name, loaded.lowercase, loaded.strip_accents, loaded.max_length) == (
        "wp", True, False, 9)
    assert loaded.encode(["The cats sat."]).to_list() == [[4, 5, 9, 6, 1]]
    assert loaded.decode_to_strings([[2, 4, 5, 9, 3, 0]]) == ["the cats"]
    assert keras.saving.serialize_keras_object(loaded) == SAVED_BEFORE_THE_SHARED_BASE
