"""Verse-aligned Bible translations from installed SWORD modules, with Strong's word links.

SWORD (the CrossWire Bible Society's library) stores a Bible as a module;
Debian packages public-domain modules, and `mod2imp MODULE` (Debian package
`libsword-utils`) prints one as plain text, a `$$$Book chapter:verse` line
before every verse, the verse in OSIS markup:

    $$$Genesis 1:1
    <w lemma="strong:H7225">EN el principio</w> <w lemma="strong:H1254">crió</w> ...

`load_bible_pairs("spaRV1909eb", "engWEB2015eb")` pairs the verses that have
text in both modules (Reina-Valera 1909, Debian `sword-text-sparv`; World
English Bible, `sword-text-web`) and returns one `BiblePair` a verse: clean
text on both sides (markup removed, footnotes dropped without gluing the
words around them, spaces normalised), the words of each side, the links
between word positions that Strong's numbers give, and the verse's split.

Strong's numbers (`strong:H0430` = the Hebrew word *elohim*) tag the words of
both translations with the original word they render: a Spanish and an
English word tagged with the same number translate the same original word,
which gives every verse pair alignment links for free. They are a noisy
reference, not gold: the Spanish module tags whole phrases (`<w ...>y la
tierra</w>`), the English one single words, and the English tags are often
shifted by a word (docs/tutorial_bible.md measures how noisy).

Words are what `kerasseq.data.WordPieceTextTokenizer` splits before it cuts
pieces: runs of letters and digits, and every other non-space character on
its own (`"God’s"` -> `["God", "’", "s"]`), so a word index here is a word
index of the translator's alignments.

The split is by chapter (`bible_split`): every chapter is in exactly one
split, dev and test about 5 % each. The Bible repeats itself (parallel
passages in Kings and Chronicles, refrains), so a training verse whose source
or target text equals a dev or test verse's is removed from train: no test
target appears verbatim in train.
"""

import bisect
import dataclasses
import functools
import glob
import hashlib
import os
import pickle
import re
import shutil
import subprocess
import zlib
from collections import Counter

from kerasseq._files import replace_atomically

MOD2IMP_PACKAGE = "libsword-utils"
# The modules this project uses and the Debian packages that install them.
MODULE_PACKAGES = {
    "spaRV1909eb": "sword-text-sparv",
    "engWEB2015eb": "sword-text-web",
}
SPLITS = ("train", "dev", "test")
# A word: a run of letters/digits; any other non-space character is a word alone.
WORD_PATTERN = re.compile(r"[^\W_]+|\S")
_VERSE_HEADER = re.compile(r"^(?P<book>.+?) (?P<chapter>\d+):(?P<verse>\d+)$")
_TAG = re.compile(r"<(?P<close>/?)(?P<name>[A-Za-z]+)(?P<attributes>[^>]*?)(?P<empty>/?)>")
_STRONG = re.compile(r"^(?:strong:)?([HG])0*(\d+)[a-z]?$")
# Elements whose content is not verse text (footnotes, cross references,
# section titles, variant readings) and elements that separate words.
_SKIPPED = {"note", "rdg", "catchWord"}
_SEPARATING = {"div", "l", "lb", "lg", "milestone", "chapter", "title", "item", "list",
               "note", "p", "speaker", "br"}


class SwordError(RuntimeError):
    """A SWORD module could not be read (missing `mod2imp`, unknown module)."""


@dataclasses.dataclass(frozen=True)
class Verse:
    """One verse of one module.

    Attributes:
        verse_id: str, `"Genesis 1:1"`.
        book, chapter, verse: the parts of the id (`"Genesis"`, 1, 1).
        text: str, the clean text.
        words: tuple of str, the words of `text` (see the module docstring).
        strongs: tuple of frozenset of str, the Strong's numbers of each
            word (`"H430"`, leading zeros dropped), empty for untagged words.
        testament: 1 (Old) or 2 (New Testament).
    """

    verse_id: str
    book: str
    chapter: int
    verse: int
    text: str
    words: tuple
    strongs: tuple
    testament: int = 1


@dataclasses.dataclass(frozen=True)
class BiblePair:
    """A verse in two translations.

    Attributes:
        verse_id, book, chapter, verse: as in `Verse`.
        source, target: str, the clean verse texts.
        source_words, target_words: tuple of str.
        links: tuple of `(source_word, target_word)` index pairs whose words
            share a Strong's number, sorted.
        split: `"train"`, `"dev"` or `"test"`.
        strong_overlap: float, Jaccard similarity of the two sides' sets of
            Strong's numbers (`None` when a side has none): low values mark
            verses whose tags (or numbering) differ in the two editions.
        testament: 1 (Old) or 2 (New Testament), from the source module.
    """

    verse_id: str
    book: str
    chapter: int
    verse: int
    source: str
    target: str
    source_words: tuple
    target_words: tuple
    links: tuple
    split: str
    strong_overlap: float = None
    testament: int = 1


def split_words(text):
    """The words of `text`: letter/digit runs, every other non-space character alone."""
    return WORD_PATTERN.findall(text)


def bible_split(book, chapter):
    """The split of a chapter: `"dev"`, `"test"` (each 1 in 20 chapters) or `"train"`.

    Decided by the CRC-32 of `"Book chapter"`, so it never changes and every
    chapter lies in exactly one split.
    """
    bucket = zlib.crc32(f"{book} {chapter}".encode("utf-8")) % 20
    return "dev" if bucket == 0 else "test" if bucket == 1 else "train"


def installed_modules(sword_path=None):
    """Names of the SWORD modules installed (read from the `mods.d/*.conf` files)."""
    roots = [sword_path] if sword_path else [
        os.environ.get("SWORD_PATH"), "/usr/share/sword", os.path.expanduser("~/.sword")]
    names = set()
    for root in filter(None, roots):
        for conf in glob.glob(os.path.join(root, "mods.d", "*.conf")):
            try:
                with open(conf, encoding="utf-8", errors="replace") as handle:
                    for line in handle:
                        match = re.match(r"^\[(.+)\]\s*$", line)
                        if match:
                            names.add(match.group(1))
                            break
            except OSError:
                continue
    return sorted(names)


def _install_hint(module):
    package = MODULE_PACKAGES.get(module)
    if package:
        return (f"install the Debian package {package} (apt-get install "
                f"--no-install-recommends {package}, or `make examples-data`)")
    return "install a SWORD module of that name (e.g. from a Debian sword-text-* package)"


def export_module(module, mod2imp="mod2imp"):
    """The text `mod2imp MODULE` prints (the module in IMP format).

    Raises:
        SwordError: `mod2imp` is not installed, or the module is not.
    """
    if not isinstance(module, str) or not module.strip():
        raise ValueError(f"`module` must be a SWORD module name. Received: module={module!r}")
    program = shutil.which(mod2imp)
    if program is None:
        raise SwordError(
            f"`{mod2imp}` was not found: it prints SWORD modules as text. Install the Debian "
            f"package {MOD2IMP_PACKAGE} (apt-get install --no-install-recommends "
            f"{MOD2IMP_PACKAGE}, or `make examples-data`).")
    result = subprocess.run([program, module], capture_output=True, check=False)
    text = result.stdout.decode("utf-8", errors="replace")
    if result.returncode != 0 or "$$$" not in text:
        installed = installed_modules()
        raise SwordError(
            f"SWORD module {module!r} is not installed ({mod2imp} said: "
            f"{result.stderr.decode('utf-8', 'replace').strip().splitlines()[:1] or 'nothing'}); "
            f"{_install_hint(module)}. Installed modules: {installed or 'none'}.")
    return text


def parse_imp(text, testaments=None):
    """`{verse_id: markup}` for every verse of an IMP text (chapter and book headings skipped).

    Args:
        text: str, what `mod2imp` prints.
        testaments: optional dict, filled with `{verse_id: 1 or 2}` (Old or
            New Testament, from the `[ Testament N Heading ]` entries).
    """
    verses = {}
    testament = 1
    for entry in re.split(r"^\$\$\$", text, flags=re.MULTILINE)[1:]:
        header, _, body = entry.partition("\n")
        heading = re.match(r"^\[ Testament (\d) Heading \]", header.strip())
        if heading:
            testament = int(heading.group(1))
        match = _VERSE_HEADER.match(header.strip())
        if match and int(match["chapter"]) > 0 and int(match["verse"]) > 0:
            verses[header.strip()] = body.strip()
            if testaments is not None:
                testaments[header.strip()] = testament
    return verses


@functools.lru_cache(maxsize=1 << 16)
def _strong_numbers(attributes):
    """The normalised Strong's numbers of a `<w>` tag's `lemma` attribute."""
    match = re.search(r'lemma="([^"]*)"', attributes)
    numbers = set()
    for item in (match.group(1).split() if match else ()):
        strong = _STRONG.match(item)
        if strong:
            numbers.add(f"{strong.group(1)}{int(strong.group(2))}")
    return frozenset(numbers)


def parse_osis_verse(markup):
    """Clean text, words and per-word Strong's numbers of one verse's OSIS markup.

    Footnotes (`<note>`), variant readings and non-canonical titles are
    dropped; canonical titles (psalm superscriptions) are kept; an element
    boundary that separates words (a note, a line, a paragraph) becomes a
    space, so `God<note>…</note><w>created</w>` reads "God created".

    Returns:
        `(text, words, strongs)`: str, tuple of str, tuple of frozenset.
    """
    chunks, tagged = [], []  # the raw text's pieces; (start, end, numbers) of tagged ones
    length, skipping, current, position = 0, 0, frozenset(), 0

    def add(text, numbers):
        nonlocal length
        if text:
            chunks.append(text)
            if numbers:
                tagged.append((length, length + len(text), numbers))
            length += len(text)

    for match in _TAG.finditer(markup):
        if not skipping:
            add(_unescape(markup[position:match.start()]), current)
        position = match.end()
        name, closing, empty = match["name"], bool(match["close"]), bool(match["empty"])
        attributes = match["attributes"]
        skip = name in _SKIPPED or (
            name == "title" and 'canonical="true"' not in attributes)
        if skip and not empty:
            skipping = max(skipping + (-1 if closing else 1), 0)
        if name == "w" and not empty:
            current = frozenset() if closing else _strong_numbers(attributes)
        if name in _SEPARATING:
            add(" ", frozenset())
    if not skipping:
        add(_unescape(markup[position:]), current)
    raw = "".join(chunks)
    starts = [start for start, _, _ in tagged]
    words, strongs = [], []
    for word in WORD_PATTERN.finditer(raw):
        words.append(word.group())
        numbers = frozenset()
        if word.group()[0].isalnum():  # the tagged chunks that overlap the word
            index = max(bisect.bisect_right(starts, word.start()) - 1, 0)
            while index < len(tagged) and tagged[index][0] < word.end():
                if tagged[index][1] > word.start():
                    numbers = numbers | tagged[index][2]
                index += 1
        strongs.append(numbers)
    return _normalise_spaces(raw), tuple(words), tuple(strongs)


def _unescape(text):
    if "&" not in text:
        return text
    return (text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
            .replace("&apos;", "'").replace("&amp;", "&"))


def _normalise_spaces(text):
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r" ([.,;:!?’”»)\]])", r"\1", text)  # a note before punctuation left a space
    return re.sub(r"([“‘«¿¡(\[]) ", r"\1", text)  # and one after an opening mark


def load_module(module, mod2imp="mod2imp"):
    """Every verse with text of an installed SWORD module, as `{verse_id: Verse}`.

    Parsed once per process and `(module, mod2imp)` (a copy of the dict is
    returned; the `Verse`s are immutable). The parse (about 8 s per Bible on
    two CPU cores) is also kept on disk, in `$KERASSEQ_CACHE_DIR/sword` (default
    `~/.cache/kerasseq/sword`), under the SHA-256 of the module's export and
    of this file's code: a changed module or parser is parsed again, and an
    unwritable or damaged cache is ignored.
    """
    return dict(_load_module(module, shutil.which(mod2imp) or mod2imp))


def _cache_dir():
    root = os.environ.get("KERASSEQ_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "kerasseq")
    return os.path.join(root, "sword")


@functools.lru_cache(maxsize=1)
def _parser_fingerprint():
    with open(__file__, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


@functools.lru_cache(maxsize=8)
def _load_module(module, mod2imp):
    text = export_module(module, mod2imp)
    key = hashlib.sha256(f"{_parser_fingerprint()}\n{text}".encode("utf-8")).hexdigest()[:32]
    path = os.path.join(_cache_dir(), f"{re.sub(r'[^A-Za-z0-9_.-]', '_', module)}-{key}.pickle")
    try:
        with open(path, "rb") as handle:
            return pickle.load(handle)
    except Exception:  # noqa: BLE001  not cached yet, or unreadable/damaged: parse again
        pass
    verses = _parse_module(text)
    try:
        replace_atomically(lambda temporary: _write_pickle(temporary, verses), path)
    except OSError:
        pass  # a read-only home: the parse is simply not kept
    return verses


def _write_pickle(path, value):
    with open(path, "wb") as handle:
        pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)


def _parse_module(text):
    verses, testaments = {}, {}
    for verse_id, markup in parse_imp(text, testaments).items():
        text, words, strongs = parse_osis_verse(markup)
        if not words:
            continue
        match = _VERSE_HEADER.match(verse_id)
        verses[verse_id] = Verse(verse_id, match["book"], int(match["chapter"]),
                                 int(match["verse"]), text, words, strongs,
                                 testaments[verse_id])
    return verses


def strong_links(source_strongs, target_strongs):
    """Sorted `(i, j)` pairs of source word i and target word j sharing a Strong's number."""
    by_number = {}
    for j, numbers in enumerate(target_strongs):
        for number in numbers:
            by_number.setdefault(number, []).append(j)
    links = set()
    for i, numbers in enumerate(source_strongs):
        for number in numbers:
            links.update((i, j) for j in by_number.get(number, ()))
    return tuple(sorted(links))


def _overlap(source_strongs, target_strongs):
    source = set().union(*source_strongs) if source_strongs else set()
    target = set().union(*target_strongs) if target_strongs else set()
    if not source or not target:
        return None
    return len(source & target) / len(source | target)


def pair_verses(source_verses, target_verses, min_strong_overlap=0.0, max_length_ratio=2.5,
                deduplicate=True):
    """Pair two modules' verses by id; see `load_bible_pairs` for the arguments.

    Returns:
        `(pairs, report)`: the list of `BiblePair` in the source module's
        order, and a dict counting what was dropped and why.
    """
    pairs, report = [], Counter()
    for verse_id, source in source_verses.items():
        target = target_verses.get(verse_id)
        if target is None:
            report["verses_only_in_source"] += 1
            continue
        ratio = len(target.words) / len(source.words)
        if max_length_ratio and not 1 / max_length_ratio <= ratio <= max_length_ratio:
            report["dropped_length_ratio"] += 1
            continue
        overlap = _overlap(source.strongs, target.strongs)
        if min_strong_overlap and overlap is not None and overlap < min_strong_overlap:
            report["dropped_strong_mismatch"] += 1
            continue
        pairs.append(BiblePair(
            verse_id, source.book, source.chapter, source.verse, source.text, target.text,
            source.words, target.words, strong_links(source.strongs, target.strongs),
            bible_split(source.book, source.chapter), overlap, source.testament))
    report["verses_only_in_target"] = len(set(target_verses) - set(source_verses))
    if deduplicate:
        pairs, removed = remove_train_duplicates(pairs)
        report["train_duplicates_removed"] = removed
    report["pairs"] = len(pairs)
    for split in SPLITS:
        report[f"{split}_pairs"] = sum(pair.split == split for pair in pairs)
    return pairs, dict(report)


def _key(text):
    return " ".join(split_words(text.lower()))


def remove_train_duplicates(pairs):
    """Drop training pairs whose source or target text (lower-cased, words) is a dev/test one's.

    Returns:
        `(pairs, removed)`: the kept pairs (order kept) and how many were dropped.
    """
    held_out = set()
    for pair in pairs:
        if pair.split != "train":
            held_out.update((("source", _key(pair.source)), ("target", _key(pair.target))))
    kept = [pair for pair in pairs if pair.split != "train" or (
        ("source", _key(pair.source)) not in held_out
        and ("target", _key(pair.target)) not in held_out)]
    return kept, len(pairs) - len(kept)


def load_bible_pairs(source_module="spaRV1909eb", target_module="engWEB2015eb", split=None,
                     mod2imp="mod2imp", min_strong_overlap=0.0, max_length_ratio=2.5,
                     deduplicate=True,
                     return_report=False):
    """Verse-aligned pairs of two installed SWORD Bible modules.

    Args:
        source_module, target_module: SWORD module names (default Reina-Valera
            1909 → World English Bible).
        split: `None` for every pair, or `"train"`, `"dev"`, `"test"`.
        mod2imp: the `mod2imp` program (Debian `libsword-utils`).
        min_strong_overlap: float in [0, 1), default 0 (keep every pair). A
            verse pair whose sets of Strong's numbers have a Jaccard
            similarity below this is dropped. Off by default: in whole
            chapters (Genesis 32, Exodus 8) the English tags follow the
            Hebrew verse numbers while the texts pair correctly, so a low
            overlap more often marks shifted tags than shifted verses.
        max_length_ratio: float > 1 or 0. A pair whose word counts differ by
            more than this factor is dropped: the editions number the verse
            differently (Judges 14:19/20, Numbers 13:26) or one edition
            appends other text (the WEB's glossary after Revelation 22:21).
            0 keeps every pair.
        deduplicate: bool. Remove training pairs whose source or target
            equals a dev or test pair's (`remove_train_duplicates`).
        return_report: bool. Also return the counts of what was dropped.

    Returns:
        A list of `BiblePair` (and the report dict with `return_report`).

    Raises:
        SwordError: `mod2imp` or a module is not installed (the message
            names the Debian package).
        ValueError: an unknown `split`.
    """
    if split is not None and split not in SPLITS:
        raise ValueError(f"`split` must be None or one of {SPLITS}. Received: split={split!r}")
    if max_length_ratio and not max_length_ratio > 1:
        raise ValueError("`max_length_ratio` must be 0 (off) or > 1. Received: "
                         f"max_length_ratio={max_length_ratio!r}")
    if not 0 <= min_strong_overlap < 1:
        raise ValueError("`min_strong_overlap` must be in [0, 1). Received: "
                         f"min_strong_overlap={min_strong_overlap!r}")
    pairs, report = pair_verses(load_module(source_module, mod2imp),
                                load_module(target_module, mod2imp),
                                min_strong_overlap=min_strong_overlap,
                                max_length_ratio=max_length_ratio, deduplicate=deduplicate)
    if split is not None:
        pairs = [pair for pair in pairs if pair.split == split]
    return (pairs, report) if return_report else pairs
