import pytest

from kerasseq.data.cmudict import (
    entries_to_pairs,
    load_cmudict,
    load_cmudict_tokenizers,
    parse_cmudict_lines,
)


@pytest.fixture(scope="module")
def splits():
    return {name: load_cmudict(name) for name in ("train", "dev", "test", "all")}


def test_split_sizes_match_g2p_seq2seq(splits):
    assert len(splits["train"]) == 107_146
    assert len(splits["dev"]) == 6_302
    assert len(splits["test"]) == 12_604
    assert len(splits["all"]) == 126_052


def test_splits_are_disjoint_and_interleaved(splits):
    words = {name: [word for word, _ in entries] for name, entries in splits.items()}
    assert not set(words["train"]) & set(words["test"])
    assert not set(words["train"]) & set(words["dev"])
    assert not set(words["dev"]) & set(words["test"])
    everything = words["all"]
    assert len(set(everything)) == len(everything)
    assert words["test"][:2] == everything[17:19]
    assert words["dev"][0] == everything[19]
    assert words["train"][:17] == everything[:17]


def test_entries_have_no_stress_markers_or_comments(splits):
    entries = dict(splits["all"])
    assert entries["hello"] == ["HH AH L OW", "HH EH L OW"]
    assert entries["abstract"] == ["AE B S T R AE K T"]  # stress-only variants merged
    assert entries["aalborg"][0] == "AO L B AO R G"  # "# place, danish" removed
    for word, prons in splits["all"][:2000]:
        assert "(" not in word and prons
        for pron in prons:
            assert not any(ch.isdigit() for ch in pron) and "#" not in pron


def test_parse_rules_on_hand_made_lines():
    lines = [
        "read R EH1 D",
        "read(2) R IY1 D",
        "read(3) R EH2 D # same as the first one without stress",
        "",
        "a AH0",
    ]
    assert parse_cmudict_lines(lines) == [("read", ["R EH D", "R IY D"]), ("a", ["AH"])]


def test_entries_to_pairs_and_bad_split():
    assert entries_to_pairs(
        [("hello", ["HH AH L OW", "HH EH L OW"]), ("a", ["AH"])]
    ) == [
        ("hello", "HH AH L OW"),
        ("hello", "HH EH L OW"),
        ("a", "AH"),
    ]
    with pytest.raises(ValueError, match="split.*Received: split='validation'"):
        load_cmudict("validation")


def test_tokenizers():
    words, phonemes = load_cmudict_tokenizers(
        [("cat", ["K AE T"]), ("at", ["AE T", "AH T"])]
    )
    assert words.split == "character" and phonemes.split == "whitespace"
    assert words.vocabulary == ["a", "t", "c"]
    assert phonemes.vocabulary == ["T", "AE", "AH", "K"]
    with pytest.raises(ValueError, match="entries"):
        load_cmudict_tokenizers([])


def test_word_tokenizer_is_case_insensitive():
    words, phonemes = load_cmudict_tokenizers(
        [("hello", ["HH AH L OW"]), ("ecole", ["EY K OW L"])]
    )
    assert words.lowercase is True and phonemes.lowercase is False
    ids = words.encode(["hello", "Hello", "HELLO"]).to_list()
    assert ids[0] == ids[1] == ids[2] and 1 not in ids[0]
    assert words.get_config()["lowercase"] is True
    # Phonemes stay case-sensitive: "hh" is not "HH".
    assert phonemes.encode(["HH OW", "hh ow"]).to_list() == [[8, 5], [1, 1]]
    # Opting out keeps the old, case-sensitive behaviour.
    cased, _ = load_cmudict_tokenizers([("hello", ["HH AH L OW"])], lowercase=False)
    assert cased.lowercase is False and cased.encode(["HELLO"]).to_list()[0][0] == 1


def test_g2p_model_translates_any_case_and_keeps_it_after_saving(tmp_path):
    import keras

    from kerasseq.models import build_rnn_seq2seq

    words, phonemes = load_cmudict_tokenizers(
        [("hello", ["HH AH L OW"]), ("help", ["HH EH L P"])]
    )
    keras.utils.set_random_seed(0)
    model = build_rnn_seq2seq(
        embedding_dim=8, units=8, source_tokenizer=words, target_tokenizer=phonemes
    )
    texts = ["hello", "Hello", "HELLO"]
    outputs = model.translate(texts, method="greedy")
    assert len(outputs) == 3 and outputs[0] == outputs[1] == outputs[2]

    path = tmp_path / "g2p.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.source_tokenizer.lowercase is True
    assert loaded.target_tokenizer.lowercase is False
    assert loaded.source_tokenizer.encode(texts).to_list() == words.encode(["hello"] * 3).to_list()
    assert loaded.translate(texts, method="greedy") == outputs
