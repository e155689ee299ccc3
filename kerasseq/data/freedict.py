"""German→English sentence pairs from the FreeDict German–English (Ding) dictionary.

Debian ships the dictionary as `dict-freedict-deu-eng`
(`apt-get install dict-freedict-deu-eng`), a dictd database whose text is
`/usr/share/dictd/freedict-deu-eng.dict.dz`. dictzip is gzip with a random
access table in an extra header field, so `gzip.open` reads it.

Most headwords are single words or phrases, but about 13,000 are whole
example sentences. Such an entry is a headword line with the sentence and
its IPA transcription, followed by the English translation on the next line
(and optional `see:` / `Synonym:` lines):

```
Ich muss warten, bis meine Ablösung kommt. /ɪç mˈʊs vˈaɾtən …/
I have to wait until my relief comes/arrives.
 see: {jds. Ablösung}
```

`parse_freedict_lines` keeps an entry when its headword

1. is followed by ` /IPA/` and nothing else on the line (no `<grammar>`),
2. ends in `.`, `?` or `!` and starts with an upper-case letter (a sentence,
   not a phrase such as `das Abhaken von etw.`),
3. does not end in an abbreviation (`etw.`, `jdn.`, `usw.`, ...),

and cleans both sides (`clean_text`):

- usage labels in brackets are removed: `[Am.]`, `[ugs.]`, `{...}`, `<...>`;
- of several English translations of one sentence (`Get out!, Get out of
  here!`: a `, ` or `; ` right after `.`, `?` or `!`) the first is kept;
- of slash alternatives inside a word (`comes/arrives`) the first is kept;
- parentheses around optional words are dropped, the words are kept
  (`There's no (such thing as a) free lunch.` →
  `There's no such thing as a free lunch.`);
- pairs with a spaced slash (`gut / schlecht`, whose scope cannot be
  recovered reliably) are skipped;
- whitespace is normalized and exact duplicate pairs are kept once.

With the Debian package 2022.04.21-1 (FreeDict edition 1.9-fd1) this gives
12,364 pairs (see `tests/data/test_freedict.py` for the rules on small
examples).
"""

import gzip
import os
import re

DEFAULT_PATH = "/usr/share/dictd/freedict-deu-eng.dict.dz"
INSTALL_HINT = (
    "the FreeDict German-English dictionary is not installed. On Debian/Ubuntu: "
    "`sudo apt-get install dict-freedict-deu-eng` (or `make examples-data`)."
)

# "Sentence. /ipa/" and nothing else: the IPA is the last /.../ of the line.
_HEADWORD_LINE = re.compile(r"^(?P<sentence>\S.*?[.?!])\s+/[^/]*/\s*$")
_ABBREVIATIONS = frozenset(
    "etw. jdn. jdm. jds. jd. sth. sb. sb.'s usw. bzw. z.B. u.a. etc. ca. Nr. vs.".split()
)
_LABELS = re.compile(r"\[[^\]]*\]|\{[^}]*\}|<[^>]*>")
_FIRST_ALTERNATIVE = re.compile(r"(?<=[.?!])\s*[,;]\s+")
_WORD_SLASH = re.compile(r"(?<=\S)/[^\s.,;:?!]+")
_SPACED_SLASH = re.compile(r"\s/|/\s")
_SPACES = re.compile(r"\s+")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+(?=[.,;:?!])")


def clean_text(text):
    """Clean one side of a pair (see the module docstring).

    Args:
        text: str, a German headword sentence or an English translation line.

    Returns:
        The cleaned str, or `None` if the text has a spaced slash alternative
        or nothing is left.

    Example:

    >>> clean_text(" [ugs.] You (sure) could have fooled me! [iron.] , And pigs might fly!")
    'You sure could have fooled me!'
    >>> clean_text("I have to wait until my relief comes/arrives.")
    'I have to wait until my relief comes.'
    """
    text = _LABELS.sub(" ", text)
    text = _SPACES.sub(" ", text).strip()
    text = _FIRST_ALTERNATIVE.split(text, maxsplit=1)[0]
    if _SPACED_SLASH.search(text):
        return None
    text = _WORD_SLASH.sub("", text)
    text = text.replace("(", "").replace(")", "")
    text = _SPACE_BEFORE_PUNCTUATION.sub("", _SPACES.sub(" ", text)).strip(" ,;")
    return text or None


def _is_sentence(headword):
    first = headword.lstrip("\"'„‚»")[:1]
    last_word = headword.split()[-1]
    return first.isupper() and last_word not in _ABBREVIATIONS


def parse_freedict_lines(lines, max_pairs=None):
    """Extract cleaned `(german, english)` sentence pairs from dictionary lines.

    Args:
        lines: iterable of str, the lines of the dictd text (without or with
            trailing newlines).
        max_pairs: optional int, stop reading after this many pairs.

    Returns:
        list of `(german, english)` str pairs, in file order, without
        duplicates.

    Example:

    >>> parse_freedict_lines([
    ...     "Ablösung /ˈaplˌøːzʊŋ/ <fem, n, sg>",
    ...     "redemption <n>",
    ...     "Ich muss warten, bis meine Ablösung kommt. /ɪç mˈʊs/",
    ...     "I have to wait until my relief comes/arrives.",
    ...     " see: {jds. Ablösung}",
    ... ])
    [('Ich muss warten, bis meine Ablösung kommt.', 'I have to wait until my relief comes.')]
    """
    pairs, seen = [], set()
    previous = None
    for line in lines:
        line = line.rstrip("\r\n")
        if previous is not None:
            german, english = clean_text(previous), clean_text(line)
            previous = None
            if german and english and (german, english) not in seen:
                seen.add((german, english))
                pairs.append((german, english))
                if max_pairs is not None and len(pairs) >= max_pairs:
                    break
        match = _HEADWORD_LINE.match(line)
        if match and _is_sentence(match.group("sentence")):
            previous = match.group("sentence")
    return pairs


def load_freedict_pairs(path=DEFAULT_PATH, max_pairs=None):
    """Load German→English sentence pairs from the FreeDict dictd file.

    Args:
        path: the `.dict.dz` (dictzip/gzip) or plain `.dict` file.
        max_pairs: optional int, keep only the first `max_pairs` pairs (and
            stop reading the file there).

    Returns:
        list of `(german, english)` str pairs (see the module docstring).

    Raises:
        FileNotFoundError: the file does not exist (the message says how to
            install the Debian package).

    Example:

    >>> pairs = load_freedict_pairs()  # doctest: +SKIP
    >>> pairs[0]  # doctest: +SKIP
    ('Abdrücken verboten!', 'No humping!')
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found: {INSTALL_HINT}")
    opener = gzip.open if path.endswith((".dz", ".gz")) else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return parse_freedict_lines(handle, max_pairs=max_pairs)
