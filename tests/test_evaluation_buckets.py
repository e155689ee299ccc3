import math

import pytest

from kerasseq.evaluation import scores_by_length


def test_bleu_buckets_match_hand_computed_values():
    sources = ["a", "b c d e f g", "h i j k l m n o p q r s"]  # 1, 6 and 12 words
    hypotheses = ["the cat is on mat", "a dog ran home fast", "x y z"]
    references = ["the cat is on the mat", "a dog ran home fast", "a b c"]
    rows = scores_by_length(sources, hypotheses, references, buckets=(0, 5, 10, 20))
    assert [row["bucket"] for row in rows] == ["0-4", "5-9", "10-19", "20+"]
    assert [row["count"] for row in rows] == [1, 1, 1, 0]
    assert [(row["min_length"], row["max_length"]) for row in rows] == [
        (0, 4), (5, 9), (10, 19), (20, None)
    ]
    # p1..p4 = 5/5, 3/4, 2/3, 1/2; c = 5 < r = 6 so BP = exp(1 - 6/5).
    expected = 100 * math.exp(1 - 6 / 5) * (1 * 3 / 4 * 2 / 3 * 1 / 2) ** 0.25
    assert rows[0]["score"] == pytest.approx(expected, abs=1e-6)
    assert rows[1]["score"] == pytest.approx(100.0)
    assert rows[2]["score"] == pytest.approx(0.0)
    assert rows[3]["score"] is None


def test_wer_and_per_buckets_use_characters_for_g2p():
    sources = ["cat", "tensor", "keras", "go"]
    hypotheses = ["K AE T", "T EH N S ER", "K EH R AH S", "G OW OW"]
    references = ["K AE T", "T EH N S ER", ["K EH R AH Z", "K EH R AH ZZ"], "G OW"]
    wer = scores_by_length(sources, hypotheses, references, buckets=(0, 5), metric="wer")
    assert [(row["bucket"], row["count"]) for row in wer] == [("0-4", 2), ("5+", 2)]
    assert wer[0]["score"] == pytest.approx(1 / 2)  # "go" is wrong
    assert wer[1]["score"] == pytest.approx(1 / 2)  # "keras" is wrong
    per = scores_by_length(sources, hypotheses, references, buckets=(0, 5), metric="per")
    assert per[0]["score"] == pytest.approx(1 / 5)  # one insertion over 3 + 2 phonemes
    assert per[1]["score"] == pytest.approx(1 / 10)  # one substitution over 5 + 5


def test_length_can_be_a_callable_or_words():
    rows = scores_by_length(["ab cd", "abcdef"], ["x", "y"], ["x", "z"], buckets=(0, 3),
                            metric="wer", length="words")
    assert [row["count"] for row in rows] == [2, 0]
    rows = scores_by_length(["ab cd", "abcdef"], ["x", "y"], ["x", "z"], buckets=(0, 6),
                            metric="wer", length=len)
    assert [(row["count"], row["score"]) for row in rows] == [(1, 0.0), (1, 1.0)]


def test_bad_arguments():
    with pytest.raises(ValueError, match="metric"):
        scores_by_length(["a"], ["a"], ["a"], metric="meteor")
    with pytest.raises(ValueError, match="buckets"):
        scores_by_length(["a"], ["a"], ["a"], buckets=(10, 5))
    with pytest.raises(ValueError, match="len\\(sources\\)"):
        scores_by_length(["a", "b"], ["a"], ["a"])
    with pytest.raises(ValueError, match="length"):
        scores_by_length(["a"], ["a"], ["a"], length="tokens")
