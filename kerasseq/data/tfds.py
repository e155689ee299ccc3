"""Sentence pairs from a TensorFlow Datasets translation dataset."""

TFDS_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


def load_tfds_pairs(name, split="train", data_dir=None, limit=None, max_words=None):
    """`(source, target)` str pairs of a supervised TFDS translation dataset.

    Loads `tfds.load(name, split=split, as_supervised=True)` (downloading and
    preparing the dataset on first use, which needs internet), decodes the
    UTF-8 bytes and drops pairs with an empty side.

    Args:
        name: TFDS name, e.g. `"ted_hrlr_translate/pt_to_en"`.
        split: TFDS split or slice (`"train"`, `"validation[:500]"`, ...).
        data_dir: TFDS data directory (None = the TFDS default).
        limit: optional int, keep at most this many pairs (after filtering).
        max_words: optional int, drop pairs with more words on either side.

    Returns:
        list of `(source, target)` str pairs, in the order of the split.

    Example:

    >>> pairs = load_tfds_pairs("ted_hrlr_translate/pt_to_en", "validation", limit=2)  # doctest: +SKIP
    """
    import tensorflow_datasets as tfds

    examples = tfds.load(name, split=split, as_supervised=True, data_dir=data_dir,
                         shuffle_files=False)
    pairs = []
    for source, target in examples.as_numpy_iterator():  # bytes, bytes
        source, target = source.decode("utf-8").strip(), target.decode("utf-8").strip()
        if not source or not target:
            continue
        if max_words is not None and max(len(source.split()), len(target.split())) > max_words:
            continue
        pairs.append((source, target))
        if limit is not None and len(pairs) >= limit:
            break
    return pairs
