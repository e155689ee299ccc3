"""Error rates for grapheme-to-phoneme (G2P) and corpus scores for translation.

G2P (the CMUdict convention, as in cmusphinx g2p-seq2seq and Phonetisaurus):

- **WER** (word error rate): the fraction of words whose predicted
  pronunciation is not exactly one of the reference pronunciations.
- **PER** (phoneme error rate): for each word take the reference with the
  smallest Levenshtein distance (substitutions, insertions and deletions of
  phonemes, each costing 1) to the hypothesis; PER is the sum of those
  distances divided by the sum of the lengths, in phonemes, of the chosen
  references. When two references are equally close, the first one listed is
  chosen. PER can exceed 1 when hypotheses are much longer than references.

Pronunciations are compared as phoneme lists: `"HH AH  L OW"` and
`"HH AH L OW"` are the same. Edit distances come from `rapidfuzz`.

Translation: `corpus_bleu` and `corpus_chrf` are thin wrappers over sacreBLEU,
so scores are the standard, comparable ones (0-100 scale).
"""

from rapidfuzz.distance import Levenshtein


def _as_reference_list(reference, index):
    if isinstance(reference, str):
        return [reference]
    references = list(reference)
    if not references or not all(isinstance(r, str) for r in references):
        raise ValueError(
            "Each reference must be a str or a non-empty list of str. "
            f"Received at index {index}: {reference!r:.200}"
        )
    return references


def _check_lengths(hypotheses, references):
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise ValueError(
            "`hypotheses` and `references` must be lists (one entry per example), "
            "not a single str."
        )
    hypotheses = list(hypotheses)
    references = list(references)
    if len(hypotheses) != len(references):
        raise ValueError(
            "`hypotheses` and `references` must have the same length. Received "
            f"len(hypotheses)={len(hypotheses)}, len(references)={len(references)}"
        )
    if not hypotheses:
        raise ValueError("`hypotheses` and `references` must not be empty.")
    for index, hypothesis in enumerate(hypotheses):
        if not isinstance(hypothesis, str):
            raise ValueError(
                f"Each hypothesis must be a str. Received at index {index}: {hypothesis!r:.200}"
            )
    return hypotheses, [_as_reference_list(r, i) for i, r in enumerate(references)]


def _closest_reference(hypothesis_tokens, reference_token_lists):
    """`(distance, reference_length)` of the closest reference (first on ties)."""
    best = None
    for reference_tokens in reference_token_lists:
        distance = Levenshtein.distance(hypothesis_tokens, reference_tokens)
        if best is None or distance < best[0]:
            best = (distance, len(reference_tokens))
    return best


def g2p_error_rates(hypotheses, references):
    """Word and phoneme error rates of G2P predictions.

    Args:
        hypotheses: list of str, one predicted pronunciation per word
            (space-separated phonemes, `"HH AH L OW"`).
        references: list with one entry per word: a str or a list of str (all
            acceptable pronunciations of the word).

    Returns:
        dict with `"wer"` (float in [0, 1]), `"per"` (float >= 0) and `"words"`
        (int, number of words scored). See the module docstring for the exact
        definitions.

    Example:

    >>> g2p_error_rates(["HH AH L OW", "K AE T"], [["HH EH L OW", "HH AH L OW"], "K AE T S"])
    {'wer': 0.5, 'per': 0.125, 'words': 2}
    """
    hypotheses, references = _check_lengths(hypotheses, references)
    wrong_words = 0
    total_distance = 0
    total_length = 0
    for hypothesis, candidates in zip(hypotheses, references, strict=True):
        hypothesis_tokens = hypothesis.split()
        candidate_tokens = [candidate.split() for candidate in candidates]
        distance, length = _closest_reference(hypothesis_tokens, candidate_tokens)
        wrong_words += distance != 0
        total_distance += distance
        total_length += length
    if total_length == 0:
        raise ValueError(
            "The chosen references have no phoneme at all; PER is undefined."
        )
    return {
        "wer": wrong_words / len(hypotheses),
        "per": total_distance / total_length,
        "words": len(hypotheses),
    }


def word_error_rate(hypotheses, references):
    """Fraction of words whose hypothesis equals none of their references.

    Args:
        hypotheses: list of str (space-separated phonemes).
        references: list of str or of lists of str (acceptable answers).

    Returns:
        float in [0, 1].

    Example:

    >>> word_error_rate(["K AE T", "D AO G"], ["K AE T", ["D AA G", "D AO G Z"]])
    0.5
    """
    return g2p_error_rates(hypotheses, references)["wer"]


def phoneme_error_rate(hypotheses, references):
    """Phoneme edit distance to the closest reference, over reference length.

    Args:
        hypotheses: list of str (space-separated phonemes).
        references: list of str or of lists of str (acceptable answers).

    Returns:
        float >= 0: `sum(distance) / sum(len(closest reference))`.

    Example:

    >>> phoneme_error_rate(["K AE T", "D AO G"], ["K AE T", ["D AA G", "D AO G Z"]])
    0.16666666666666666
    """
    return g2p_error_rates(hypotheses, references)["per"]


def _reference_streams(hypotheses, references):
    """sacreBLEU wants one list per reference "stream"; examples with fewer
    references than the maximum get `None` in the extra streams."""
    hypotheses, references = _check_lengths(hypotheses, references)
    num_streams = max(len(candidates) for candidates in references)
    streams = [
        [candidates[k] if k < len(candidates) else None for candidates in references]
        for k in range(num_streams)
    ]
    return hypotheses, streams


def corpus_bleu(hypotheses, references, **bleu_kwargs):
    """Corpus-level sacreBLEU (4-gram precision, brevity penalty, 13a tokenizer).

    Args:
        hypotheses: list of str, the system outputs (detokenized text).
        references: list with one entry per hypothesis: a str or a list of str.
        **bleu_kwargs: passed to `sacrebleu.metrics.BLEU` (`tokenize`,
            `lowercase`, `smooth_method`, ...).

    Returns:
        float, BLEU on the 0-100 scale (exactly `sacrebleu.corpus_bleu(...).score`).

    Example:

    >>> round(corpus_bleu(["the cat is on mat"], ["the cat is on the mat"]), 2)
    57.89
    """
    from sacrebleu.metrics import BLEU

    hypotheses, streams = _reference_streams(hypotheses, references)
    return BLEU(**bleu_kwargs).corpus_score(hypotheses, streams).score


def corpus_chrf(hypotheses, references, **chrf_kwargs):
    """Corpus-level chrF (character n-gram F-score) from sacreBLEU.

    Args:
        hypotheses: list of str.
        references: list with one entry per hypothesis: a str or a list of str.
        **chrf_kwargs: passed to `sacrebleu.metrics.CHRF` (e.g. `word_order=2`
            for chrF++).

    Returns:
        float, chrF on the 0-100 scale.

    Example:

    >>> round(corpus_chrf(["the cat is on mat"], ["the cat is on the mat"]), 2)
    64.2
    """
    from sacrebleu.metrics import CHRF

    hypotheses, streams = _reference_streams(hypotheses, references)
    return CHRF(**chrf_kwargs).corpus_score(hypotheses, streams).score
