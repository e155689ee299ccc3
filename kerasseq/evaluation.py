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
so scores are the standard, comparable ones (0-100 scale); `count_repetitions`
counts the outputs of a decoder that loops.
"""

import bisect
import re

from rapidfuzz.distance import Levenshtein

__all__ = [
    "corpus_bleu",
    "corpus_chrf",
    "count_repetitions",
    "g2p_error_rates",
    "phoneme_error_rate",
    "scores_by_length",
    "word_error_rate",
]


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
    distance, _, length = min((Levenshtein.distance(hypothesis_tokens, reference), index,
                               len(reference))
                              for index, reference in enumerate(reference_token_lists))
    return distance, length


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


# --------------------------------------------------------- by source length
LENGTH_METRICS = ("bleu", "chrf", "wer", "per")


def _source_length_function(length, metric):
    if callable(length):
        return length
    if length is None:
        length = "characters" if metric in ("wer", "per") else "words"
    if length == "words":
        return lambda text: len(text.split())
    if length == "characters":
        return lambda text: len(text.replace(" ", ""))
    raise ValueError(
        "length must be 'words', 'characters', a callable or None. "
        f"Received: length={length!r}"
    )


def _check_bucket_edges(buckets):
    edges = [int(edge) for edge in buckets]
    if not edges or any(b <= a for a, b in zip(edges, edges[1:], strict=False)) or edges[0] < 0:
        raise ValueError(
            "buckets must be non-empty, non-negative and strictly increasing "
            f"lower edges. Received: buckets={tuple(buckets)!r}"
        )
    return edges


def scores_by_length(sources, hypotheses, references, buckets=(0, 10, 20, 30, 40),
                     metric="bleu", length=None, **metric_kwargs):
    """Scores of the examples grouped by the length of their source sentence.

    Attention-free encoder–decoders degrade on long inputs (Cho et al. 2014;
    Bahdanau et al. 2014, figure 2); this report shows by how much.

    `buckets` are lower edges: with `(0, 10, 20)` the buckets hold sources of
    length 0-9, 10-19 and 20 or more. Each bucket is scored on its own with
    the corpus-level metric (`corpus_bleu`, `corpus_chrf`, or the WER/PER of
    `g2p_error_rates`), which is not the same as averaging sentence scores.

    Args:
        sources: list of str, the source sentences (or words, for G2P).
        hypotheses: list of str, one system output per source.
        references: list of str or of lists of str, one entry per source.
        buckets: increasing lower edges of the length buckets.
        metric: "bleu" or "chrf" (0-100, higher is better), "wer" or "per"
            (fractions, lower is better).
        length: how to measure a source: "words" (whitespace tokens),
            "characters" (spaces excluded) or a callable `str -> int`. Default:
            "characters" for "wer"/"per" (G2P sources are single words), else
            "words".
        **metric_kwargs: passed to `corpus_bleu` / `corpus_chrf`.

    Returns:
        A list with one dict per bucket, in order: `"bucket"` (label such as
        `"10-19"` or `"40+"`), `"min_length"`, `"max_length"` (None for the
        last, open bucket), `"count"` (number of examples) and `"score"`
        (None for an empty bucket).

    Example:

    >>> rows = scores_by_length(["a b", "a b c d"], ["x y", "x y z"],
    ...                         ["x y", "x y z w"], buckets=(0, 3), metric="wer",
    ...                         length="words")
    >>> [(row["bucket"], row["count"], row["score"]) for row in rows]
    [('0-2', 1, 0.0), ('3+', 1, 1.0)]
    """
    if metric not in LENGTH_METRICS:
        raise ValueError(
            f"metric must be one of {list(LENGTH_METRICS)}. Received: metric={metric!r}"
        )
    hypotheses, reference_lists = _check_lengths(hypotheses, references)
    sources = [sources] if isinstance(sources, str) else list(sources)
    if len(sources) != len(hypotheses):
        raise ValueError(
            "`sources` and `hypotheses` must have the same length. Received "
            f"len(sources)={len(sources)}, len(hypotheses)={len(hypotheses)}"
        )
    edges = _check_bucket_edges(buckets)
    measure = _source_length_function(length, metric)
    members = [[] for _ in edges]
    for index, source in enumerate(sources):
        bucket = bisect.bisect_right(edges, measure(source)) - 1
        if bucket >= 0:  # shorter than the first edge: in no bucket
            members[bucket].append(index)
    rows = []
    for bucket, low in enumerate(edges):
        high = edges[bucket + 1] - 1 if bucket + 1 < len(edges) else None
        chosen = members[bucket]
        score = None
        if chosen:
            bucket_hypotheses = [hypotheses[i] for i in chosen]
            bucket_references = [reference_lists[i] for i in chosen]
            if metric == "bleu":
                score = corpus_bleu(bucket_hypotheses, bucket_references, **metric_kwargs)
            elif metric == "chrf":
                score = corpus_chrf(bucket_hypotheses, bucket_references, **metric_kwargs)
            else:
                score = g2p_error_rates(bucket_hypotheses, bucket_references)[metric]
        rows.append({
            "bucket": f"{low}+" if high is None else f"{low}-{high}",
            "min_length": low,
            "max_length": high,
            "count": len(chosen),
            "score": score,
        })
    return rows


# Letters (not digits: "10000") of 1-4 characters that follow themselves 3 more times.
_WORD_LOOP = re.compile(r"([^\W\d_]{1,4})\1{3,}")


def count_repetitions(texts):
    """Texts in which a decoder looped: a word 3+ times in a row, or a loop inside a word.

    Counted per text (what `SearchConfig.no_repeat_ngram_size` guards against):

    - `"repeated_words"`: one word 3 or more times in a row ("the the the");
      words are compared lower-cased, without the punctuation around them, so
      "Holy, holy, holy" counts too: count the references as well.
    - `"word_loops"`: a word in which 1 to 4 letters follow themselves 4 or
      more times ("scoffff", "abababab"; "coffee" and "10000" do not).

    Args:
        texts: list of str.

    Returns:
        `{"texts": int, "repeated_words": int, "word_loops": int}`.

    Example:

    >>> count_repetitions(["the scoffffers came", "Holy, holy, holy!", "a coffee"])
    {'texts': 3, 'repeated_words': 1, 'word_loops': 1}
    """
    if isinstance(texts, str):
        raise ValueError("texts must be a list of str, not a single str.")
    counts = {"texts": 0, "repeated_words": 0, "word_loops": 0}
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"Each text must be a str. Received at index {index}: {text!r:.200}")
        words = [re.sub(r"^\W+|\W+$", "", word).lower() for word in text.split()]
        counts["texts"] += 1
        counts["repeated_words"] += any(
            first == second == third != "" for first, second, third
            in zip(words, words[1:], words[2:], strict=False))
        counts["word_loops"] += any(_WORD_LOOP.search(word) for word in words)
    return counts
