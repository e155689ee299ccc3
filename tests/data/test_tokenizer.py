import numpy as np
import pytest
import tensorflow as tf

from kerasseq.data import tokenizer as tokenizer_module
from kerasseq.data.tokenizer import (
    END_ID,
    PAD_ID,
    START_ID,
    UNK_ID,
    TextTokenizer,
)


@pytest.fixture
def char_tokenizer():
    return TextTokenizer.from_texts(["hello", "help"])


def test_reserved_ids_and_vocabulary_order(char_tokenizer):
    assert (PAD_ID, UNK_ID, START_ID, END_ID) == (0, 1, 2, 3)
    t = char_tokenizer
    assert (t.pad_id, t.unk_id, t.start_id, t.end_id) == (0, 1, 2, 3)
    # counts: l=3, e=2, h=2, o=1, p=1; ties broken by the token string.
    assert t.get_vocabulary() == [
        "[PAD]",
        "[UNK]",
        "[START]",
        "[END]",
        "l",
        "e",
        "h",
        "o",
        "p",
    ]
    assert t.vocabulary == ["l", "e", "h", "o", "p"]
    assert t.vocabulary_size == 9


def test_encode_character_unknown_and_types(char_tokenizer):
    t = char_tokenizer
    assert t.encode(["help", "hex"]).to_list() == [[6, 5, 4, 8], [6, 5, 1]]
    ids = t.encode(["help"])
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    # scalar input -> dense (length,)
    np.testing.assert_array_equal(t.encode("help").numpy(), [6, 5, 4, 8])
    np.testing.assert_array_equal(t.encode(tf.constant("help")).numpy(), [6, 5, 4, 8])
    # the layer call gives the same ids, also for a tf.string batch
    assert t(["help", "hex"]).to_list() == [[6, 5, 4, 8], [6, 5, 1]]
    assert t(tf.constant(["help", "hex"])).to_list() == [[6, 5, 4, 8], [6, 5, 1]]


def test_character_split_unicode_and_spaces():
    t = TextTokenizer.from_texts(["আমি ভাত", "Größe"])
    assert t.tokenize(["Größe"]).to_list() == [[c.encode() for c in "Größe"]]
    assert " " in t.vocabulary  # a space is kept as a token
    ids = t.encode(["আমি ভাত", "Größe"])
    assert t.decode_to_strings(ids.to_tensor()) == ["আমি ভাত", "Größe"]


def test_whitespace_split_phonemes():
    t = TextTokenizer.from_texts(["HH AH L OW", "HH EH L OW"], split="whitespace")
    assert t.vocabulary == ["HH", "L", "OW", "AH", "EH"]
    assert t.encode(["  HH  AH L OW "]).to_list() == [[4, 7, 5, 6]]
    assert t.decode_to_strings([[2, 4, 7, 5, 6, 3, 0]]) == ["HH AH L OW"]


def test_word_split_lowercase_and_punctuation():
    t = TextTokenizer.from_texts(
        ["Go, now!", "আমি ভাত খাই।"], split="word", lowercase=True
    )
    assert t.tokenize(["Go, NOW!"]).to_list() == [[b"go", b",", b"now", b"!"]]
    assert [s.decode() for s in t.tokenize("আমি ভাত খাই।").numpy()] == [
        "আমি",
        "ভাত",
        "খাই",
        "।",
    ]
    ids = t.encode(["Go now!"])
    assert t.decode_to_strings(ids) == ["go now !"]


def test_max_length_truncates_the_end():
    t = TextTokenizer(vocabulary=list("abc"), max_length=2)
    assert t.encode(["abc", "a"]).to_list() == [[4, 5], [4]]
    np.testing.assert_array_equal(t.encode("cab").numpy(), [6, 4])


def test_adapt_min_count_max_tokens_and_dataset():
    texts = ["aab", "abc"]
    assert TextTokenizer.from_texts(texts, min_count=2).vocabulary == ["a", "b"]
    assert TextTokenizer.from_texts(texts, max_tokens=5).vocabulary == ["a"]
    for dataset in (
        tf.data.Dataset.from_tensor_slices(texts),
        tf.data.Dataset.from_tensor_slices(texts).batch(2),
    ):
        assert TextTokenizer.from_texts(dataset).vocabulary == ["a", "b", "c"]


def test_adapt_is_deterministic_across_chunks(monkeypatch):
    monkeypatch.setattr(tokenizer_module, "_ADAPT_BATCH_SIZE", 2)
    texts = ["zz", "yy", "x", "ab", "ba", "zy"]
    # z=3, y=3, a=2, b=2, x=1
    assert TextTokenizer.from_texts(texts).vocabulary == ["y", "z", "a", "b", "x"]


def test_detokenize_stops_at_end_and_drops_pad_start(char_tokenizer):
    t = char_tokenizer
    ids = tf.constant(
        [[2, 6, 5, 4, 8, 3, 6, 6], [6, 5, 1, 0, 0, 0, 0, 0], [3, 6, 0, 0, 0, 0, 0, 0]]
    )
    np.testing.assert_array_equal(t.detokenize(ids).numpy(), [b"help", b"he[UNK]", b""])
    ragged = tf.ragged.constant([[6, 5, 3, 4], [6]])
    assert t.decode_to_strings(ragged) == ["he", "h"]
    assert t.detokenize(tf.constant([6, 5, 3])).numpy() == b"he"


def test_inside_tf_function(char_tokenizer):
    t = char_tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(texts):
        ids = t.encode(texts).to_tensor()
        return ids, t.detokenize(ids)

    ids, texts = round_trip(tf.constant(["help", "hole"]))
    np.testing.assert_array_equal(ids.numpy(), [[6, 5, 4, 8], [6, 7, 4, 5]])
    np.testing.assert_array_equal(texts.numpy(), [b"help", b"hole"])


class _TokenizerModule(tf.Module):
    def __init__(self, source, target):
        super().__init__()
        self.source = source
        self.target = target

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def encode(self, texts):
        return self.source.encode(texts).to_tensor()

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def detokenize(self, ids):
        return self.target.detokenize(ids)


def test_saved_model_round_trip(tmp_path, char_tokenizer):
    target = TextTokenizer.from_texts(["HH AH L OW"], split="whitespace")
    module = _TokenizerModule(char_tokenizer, target)
    texts = tf.constant(["help", "hex", ""])
    ids = tf.constant([[2, 5, 4, 3, 7], [6, 7, 1, 0, 0]])
    expected_ids = module.encode(texts).numpy()
    expected_texts = module.detokenize(ids).numpy()

    tf.saved_model.save(module, str(tmp_path / "tokenizers"))
    del module
    reloaded = tf.saved_model.load(str(tmp_path / "tokenizers"))
    np.testing.assert_array_equal(reloaded.encode(texts).numpy(), expected_ids)
    np.testing.assert_array_equal(reloaded.detokenize(ids).numpy(), expected_texts)
    np.testing.assert_array_equal(
        expected_ids, [[6, 5, 4, 8], [6, 5, 1, 0], [0, 0, 0, 0]]
    )
    np.testing.assert_array_equal(expected_texts, [b"HH AH", b"L OW [UNK]"])


def test_config_round_trip():
    t = TextTokenizer.from_texts(
        ["Go, now!"], split="word", lowercase=True, max_length=3, name="tok"
    )
    config = t.get_config()
    assert config["vocabulary"] == t.vocabulary
    assert (config["split"], config["lowercase"], config["max_length"]) == (
        "word",
        True,
        3,
    )
    clone = TextTokenizer.from_config(config)
    texts = ["go now, go!", "NOW"]
    assert clone.encode(texts).to_list() == t.encode(texts).to_list()
    assert clone.get_config() == config
    assert TextTokenizer.from_config(TextTokenizer().get_config()).vocabulary is None


def test_errors():
    with pytest.raises(
        ValueError,
        match="split.*'character', 'whitespace', 'word'.*Received: split='chars'",
    ):
        TextTokenizer(split="chars")
    with pytest.raises(ValueError, match="reserved"):
        TextTokenizer(vocabulary=["a", "[UNK]"])
    with pytest.raises(ValueError, match="duplicate.*'a'"):
        TextTokenizer(vocabulary=["a", "b", "a"])
    with pytest.raises(ValueError, match="no vocabulary yet.*adapt"):
        TextTokenizer().encode(["abc"])
    with pytest.raises(ValueError, match="max_length"):
        TextTokenizer(max_length=0)
    with pytest.raises(ValueError, match="min_count"):
        TextTokenizer().adapt(["a"], min_count=0)
    with pytest.raises(ValueError, match="no token"):
        TextTokenizer().adapt([])
    with pytest.raises(ValueError, match="texts.*strings"):
        TextTokenizer(vocabulary=["a"]).encode(tf.constant([1, 2]))


# ----------------------------------------------------------------------------
# lowercase=True: case-insensitive tokenizers (issue 15)
# ----------------------------------------------------------------------------
@pytest.fixture
def lower_tokenizer():
    return TextTokenizer.from_texts(["Hello", "école"], lowercase=True)


def test_lowercase_is_off_by_default():
    t = TextTokenizer.from_texts(["hello"])
    assert t.lowercase is False
    assert t.encode(["Hello"]).to_list() == [[1] + t.encode(["ello"]).to_list()[0]]


def test_lowercase_adapt_and_encode_eager(lower_tokenizer):
    t = lower_tokenizer
    assert all(token == token.lower() for token in t.vocabulary)
    assert "H" not in t.vocabulary and "É" not in t.vocabulary
    ids = t.encode(["hello", "Hello", "HELLO", "hElLo"]).to_list()
    assert ids[0] == ids[1] == ids[2] == ids[3]
    assert UNK_ID not in ids[0]
    np.testing.assert_array_equal(t.encode("HELLO").numpy(), ids[0])
    assert t(tf.constant(["HELLO"])).to_list() == [ids[0]]
    # Unicode-aware, not just ASCII.
    assert t.encode(["ÉCOLE"]).to_list() == t.encode(["école"]).to_list()
    assert UNK_ID not in t.encode(["ÉCOLE"]).to_list()[0]
    assert t.decode_to_strings(t.encode(["HELLO", "ÉCOLE"])) == ["hello", "école"]


def test_lowercase_inside_tf_function(lower_tokenizer):
    t = lower_tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def encode(texts):
        return t.encode(texts).to_tensor()

    ids = encode(tf.constant(["hello", "Hello", "HELLO", "ÉCOLE", "école"])).numpy()
    np.testing.assert_array_equal(ids[0], ids[1])
    np.testing.assert_array_equal(ids[0], ids[2])
    np.testing.assert_array_equal(ids[3], ids[4])
    np.testing.assert_array_equal(ids[:3, :5], t.encode(["hello"] * 3).to_tensor().numpy())
    assert UNK_ID not in ids[3]


def test_lowercase_saved_model(tmp_path, lower_tokenizer):
    target = TextTokenizer.from_texts(["HH AH L OW"], split="whitespace")
    tf.saved_model.save(_TokenizerModule(lower_tokenizer, target), str(tmp_path / "m"))
    reloaded = tf.saved_model.load(str(tmp_path / "m"))
    ids = reloaded.encode(tf.constant(["hello", "HELLO", "ÉCOLE", "école"])).numpy()
    np.testing.assert_array_equal(ids[0], ids[1])
    np.testing.assert_array_equal(ids[2], ids[3])
    # The phoneme side keeps its case.
    assert target.encode(["hh ah"]).to_list() == [[UNK_ID, UNK_ID]]


def test_lowercase_config_round_trip_and_old_configs(lower_tokenizer):
    config = lower_tokenizer.get_config()
    assert config["lowercase"] is True
    clone = TextTokenizer.from_config(config)
    assert clone.lowercase is True
    assert clone.encode(["HELLO"]).to_list() == lower_tokenizer.encode(["hello"]).to_list()
    # A config saved before the option existed loads case-sensitive.
    old = {key: value for key, value in config.items() if key != "lowercase"}
    legacy = TextTokenizer.from_config(old)
    assert legacy.lowercase is False
    assert legacy.encode(["HELLO"]).to_list()[0][0] == UNK_ID
    assert legacy.get_config()["lowercase"] is False


def test_lowercase_must_be_a_bool():
    with pytest.raises(ValueError, match="lowercase.*True or False.*'lower'"):
        TextTokenizer(lowercase="lower")
    assert TextTokenizer(lowercase=np.bool_(True)).lowercase is True


# What `keras.saving.serialize_keras_object` wrote for a TextTokenizer before
# the tokenizers shared `TokenizerBase` (issue 24): it must still load.
SAVED_BEFORE_THE_SHARED_BASE = {
    "module": "kerasseq.data.tokenizer", "class_name": "TextTokenizer",
    "config": {"name": "src", "trainable": True,
               "dtype": {"module": "keras", "class_name": "DTypePolicy",
                         "config": {"name": "float32"}, "registered_name": None},
               "vocabulary": ["h", "e", "l", "o"], "split": "character", "lowercase": True,
               "max_length": 7},
    "registered_name": "kerasseq>TextTokenizer",
}


def test_a_config_written_before_the_shared_base_still_loads():
    import keras

    from kerasseq.data.tokenizer import TokenizerBase

    loaded = keras.saving.deserialize_keras_object(SAVED_BEFORE_THE_SHARED_BASE)
    assert isinstance(loaded, TextTokenizer) and isinstance(loaded, TokenizerBase)
    assert (loaded.name, loaded.split, loaded.lowercase, loaded.max_length) == (
        "src", "character", True, 7)
    assert loaded.encode(["HELLO"]).to_list() == [[4, 5, 6, 6, 7]]
    assert loaded.decode_to_strings([[4, 5, 6, 6, 7, 3, 0]]) == ["hello"]
    again = keras.saving.serialize_keras_object(loaded)
    assert again == SAVED_BEFORE_THE_SHARED_BASE  # the same config, key for key
