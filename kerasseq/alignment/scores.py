"""Links against reference links: Pharaoh text, precision/recall/AER, symmetrisation."""


def to_pharaoh(links):
    """Links `[(i, j), ...]` as the Pharaoh text `"i-j i-j ..."`: source word i
    linked to target word j, as fast_align, eflomal and fairseq write them.

    The one formatter of that text in Python (the command line's
    `--alignments` output); `alignment_strings` writes the same text inside
    the graph of an export.

    >>> to_pharaoh([(0, 0), (2, 1)])
    '0-0 2-1'
    """
    return " ".join(f"{int(i)}-{int(j)}" for i, j in links)


def from_pharaoh(text):
    """The Pharaoh text `"i-j i-j ..."` as links `[(i, j), ...]` (see `to_pharaoh`).

    Raises:
        ValueError: a link that is not two non-negative integers joined by `-`.

    >>> from_pharaoh("0-0 2-1")
    [(0, 0), (2, 1)]
    """
    links = []
    for link in text.split():
        source, _, target = link.partition("-")
        if not (source.isdigit() and target.isdigit()):
            raise ValueError(f"A Pharaoh link is two non-negative integers joined by '-' "
                             f"(i-j). Received: {link!r} in {text!r}")
        links.append((int(source), int(target)))
    return links


def diagonal_links(num_source, num_target):
    """The diagonal baseline: target word j linked to source word round((j + 0.5) n_s / n_t - 0.5)."""
    if num_source <= 0 or num_target <= 0:
        return []
    return [(min(int((j + 0.5) * num_source / num_target), num_source - 1), j)
            for j in range(num_target)]


def alignment_scores(predicted, sure, possible=None):
    """Precision, recall, F1 and alignment error rate of links, summed over a corpus.

    Och & Ney (2003): with sure links S, possible links P ⊇ S and predicted
    links A,

        precision = |A ∩ P| / |A|,   recall = |A ∩ S| / |S|,
        AER = 1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|).

    Args:
        predicted: list (one per sentence) of iterables of `(i, j)` links.
        sure: list of iterables of gold `(i, j)` links.
        possible: optional list; `None` takes `sure` (no possible-only links).

    Returns:
        A dict: `precision`, `recall`, `f1`, `aer` (floats in [0, 1]) and the
        counts `predicted`, `sure`, `possible`, `sure_hits`, `possible_hits`.
    """
    possible = sure if possible is None else possible
    if not len(predicted) == len(sure) == len(possible):
        raise ValueError("predicted, sure and possible must hold one entry per sentence. "
                         f"Received {len(predicted)}, {len(sure)}, {len(possible)}.")
    counts = dict.fromkeys(("predicted", "sure", "possible", "sure_hits", "possible_hits"), 0)
    for links, sure_links, possible_links in zip(predicted, sure, possible, strict=True):
        links, sure_links = set(map(tuple, links)), set(map(tuple, sure_links))
        possible_links = set(map(tuple, possible_links)) | sure_links
        counts["predicted"] += len(links)
        counts["sure"] += len(sure_links)
        counts["possible"] += len(possible_links)
        counts["sure_hits"] += len(links & sure_links)
        counts["possible_hits"] += len(links & possible_links)
    precision = counts["possible_hits"] / counts["predicted"] if counts["predicted"] else 0.0
    recall = counts["sure_hits"] / counts["sure"] if counts["sure"] else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    denominator = counts["predicted"] + counts["sure"]
    aer = 1.0 - (counts["sure_hits"] + counts["possible_hits"]) / denominator if denominator else 1.0
    return {"precision": precision, "recall": recall, "f1": f1, "aer": aer, **counts}


def target_word_hit_rate(predicted, gold):
    """Share of gold-linked target words whose predicted source words include a gold one.

    Only target words with at least one gold link count; a predicted
    alignment with one link per target word (attention's arg-max) then says
    how often "the most attended source word" is a right one.

    Args:
        predicted, gold: lists (one per sentence) of iterables of `(i, j)` links.

    Returns:
        `(rate, words)`: a float in [0, 1] and the number of target words counted.
    """
    hits = words = 0
    for links, gold_links in zip(predicted, gold, strict=True):
        gold_by_target = {}
        for i, j in gold_links:
            gold_by_target.setdefault(j, set()).add(i)
        predicted_by_target = {}
        for i, j in links:
            predicted_by_target.setdefault(j, set()).add(i)
        for j, sources in gold_by_target.items():
            words += 1
            hits += bool(predicted_by_target.get(j, set()) & sources)
    return (hits / words if words else 0.0), words


def symmetrize(forward, reverse, method="grow-diag-final-and"):
    """Combine two directional alignments of one sentence (Koehn et al. 2003).

    Args:
        forward, reverse: iterables of `(i, j)` links (both as source, target).
        method: `"intersection"`, `"union"` or `"grow-diag-final-and"`.

    Returns:
        A sorted list of `(i, j)` links.
    """
    forward, reverse = set(map(tuple, forward)), set(map(tuple, reverse))
    if method == "intersection":
        return sorted(forward & reverse)
    if method == "union":
        return sorted(forward | reverse)
    if method != "grow-diag-final-and":
        raise ValueError("method must be 'intersection', 'union' or 'grow-diag-final-and'. "
                         f"Received: method={method!r}")
    union = forward | reverse
    links = set(forward & reverse)
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    added = True
    while added:
        added = False
        for i, j in sorted(links):
            for di, dj in neighbours:
                candidate = (i + di, j + dj)
                if candidate in union and candidate not in links and (
                        all(link[0] != candidate[0] for link in links)
                        or all(link[1] != candidate[1] for link in links)):
                    links.add(candidate)
                    added = True
    for direction in (forward, reverse):  # final-and: unaligned on both sides
        for i, j in sorted(direction):
            if all(link[0] != i for link in links) and all(link[1] != j for link in links):
                links.add((i, j))
    return sorted(links)
