import pytest
import sacrebleu

from kerasseq.evaluation import (
    corpus_bleu,
    corpus_chrf,
    count_repetitions,
    g2p_error_rates,
    phoneme_error_rate,
    word_error_rate,
)


def test_wer_per_hand_computed():
    hypotheses = ["HH AH L OW", "K AE T", "D AO G", "B ER D"]
    references = [
        ["HH EH L OW", "HH AH L OW"],  # matches the 2nd reference: 0 edits / 4
        "K AE T S",  # one deletion: 1 / 4
        ["D AA G", "D AO G Z"],  # both at distance 1; the first (3 phonemes) is chosen
        "B ER D",  # exact: 0 / 3
    ]
    assert word_error_rate(hypotheses, references) == pytest.approx(2 / 4)
    assert phoneme_error_rate(hypotheses, references) == pytest.approx(2 / 14)
    assert g2p_error_rates(hypotheses, references) == {
        "wer": pytest.approx(0.5),
        "per": pytest.approx(2 / 14),
        "words": 4,
    }


def test_closest_reference_sets_the_denominator():
    # distances: to "A B C D E F" = 4 (len 6), to "X Y" = 1 (len 2) -> the short one wins.
    assert phoneme_error_rate(["X"], [["A B C D E F", "X Y"]]) == pytest.approx(1 / 2)
    # whitespace differences do not count
    assert word_error_rate([" K  AE T "], ["K AE T"]) == 0.0
    # substitution + insertion: K AE T vs K AH T S -> 2 edits / 3
    assert phoneme_error_rate(["K AH T S"], ["K AE T"]) == pytest.approx(2 / 3)


def test_errors():
    with pytest.raises(ValueError, match="same length"):
        word_error_rate(["A"], ["A", "B"])
    with pytest.raises(ValueError, match="empty"):
        phoneme_error_rate([], [])
    with pytest.raises(ValueError, match="reference"):
        word_error_rate(["A"], [[]])


def test_bleu_and_chrf_match_sacrebleu():
    hypotheses = ["the cat is on mat"]
    references = ["the cat is on the mat"]
    expected = sacrebleu.corpus_bleu(hypotheses, [references]).score
    assert corpus_bleu(hypotheses, references) == pytest.approx(expected)
    # 4-grams + brevity penalty (57.9), below the seed's 0.866 toy, which is
    # bigram BLEU with the brevity penalty left out (see docs/evaluation.md).
    assert 0 < expected < 86.6
    assert corpus_chrf(hypotheses, references) == pytest.approx(
        sacrebleu.corpus_chrf(hypotheses, [references]).score
    )
    # several references per hypothesis
    multi = [["the cat is on the mat", "there is a cat on the mat"], "a dog"]
    hyps = ["there is a cat on mat", "a dog"]
    expected = sacrebleu.corpus_bleu(
        hyps, [["the cat is on the mat", "a dog"], ["there is a cat on the mat", None]]
    ).score
    assert corpus_bleu(hyps, multi) == pytest.approx(expected)


@pytest.mark.parametrize("text, repeated, looped", [
    ("the the the", 1, 0), ("the the", 0, 0), ("The, the; THE.", 1, 0),
    ("the the x the", 0, 0), ("— — — a", 0, 0),  # punctuation is no word
    ("scoffff", 0, 1), ("scofff", 0, 0), ("abababab", 0, 1), ("abababa", 0, 0),
    ("hahahaha!", 0, 1), ("xyzwxyzwxyzwxyzw", 0, 1), ("abcdeabcdeabcdeabcde", 0, 0),
    ("coffee Mississippi", 0, 0), ("10000 men", 0, 0), ("aaaa", 0, 1),
    ("go go go, scoffffers", 1, 1), ("", 0, 0),
])
def test_count_repetitions_on_hand_made_texts(text, repeated, looped):
    assert count_repetitions([text]) == {"texts": 1, "repeated_words": repeated,
                                         "word_loops": looped}


def test_count_repetitions_counts_texts_not_occurrences():
    texts = ["a a a b b b", "scoffff scoffff", "fine", "x x x"]
    assert count_repetitions(texts) == {"texts": 4, "repeated_words": 2, "word_loops": 1}
    with pytest.raises(ValueError, match="list of str"):
        count_repetitions("a a a")
    with pytest.raises(ValueError, match="at index 1"):
        count_repetitions(["a", None])
