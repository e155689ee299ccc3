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
