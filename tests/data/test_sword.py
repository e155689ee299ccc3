"""Tests for `kerasseq.data.sword` (kerasseq/data/sword.py): SWORD Bible verse pairs.

Most tests run everywhere: they write a small IMP text themselves (the verse
markup copied from the Debian modules' `mod2imp` output) and a stand-in
`mod2imp` script that prints it. The last tests read the real modules and are
skipped, with the reason, when `make examples-data` has not installed them.
"""

import os
import shutil
import stat
import textwrap

import pytest

from kerasseq.data.sword import (
    BiblePair,
    SwordError,
    bible_split,
    load_bible_pairs,
    parse_imp,
    parse_osis_verse,
    remove_train_duplicates,
    split_words,
    strong_links,
)

# Genesis 1:1 as the two modules print it (WEB with its footnote between two words).
SPANISH_GEN_1_1 = ('<w lemma="strong:H7225">EN el principio</w> <w lemma="strong:H1254">crió</w> '
                   '<w lemma="strong:H0430">Dios</w> <w lemma="strong:H8064">los cielos</w> '
                   '<w lemma="strong:H0776">y la tierra</w>.')
ENGLISH_GEN_1_1 = (
    '<w lemma="strong:H0430">In</w> <w lemma="strong:H0853">the</w> '
    '<w lemma="strong:H7225">beginning</w>, <w lemma="strong:H0430">God</w><note '
    'placement="foot"><reference type="annotateRef">1:1 </reference>The Hebrew word rendered '
    '“God” is “אֱלֹהִ֑ים” (Elohim).</note><w lemma="strong:H1254">created</w> '
    '<w lemma="strong:H0853">the</w> <w lemma="strong:H8064">heavens</w> '
    '<w lemma="strong:H0430">and</w> <w lemma="strong:H0853">the</w> '
    '<w lemma="strong:H0776">earth</w>.')


def test_words_split_like_wordpiece():
    assert split_words("God’s people, “come!”") == ["God", "’", "s", "people", ",", "“", "come",
                                                   "!", "”"]
    assert split_words("¿Qué? fué á") == ["¿", "Qué", "?", "fué", "á"]


def test_parse_verse_drops_the_note_without_gluing_words():
    text, words, strongs = parse_osis_verse(ENGLISH_GEN_1_1)
    assert text == "In the beginning, God created the heavens and the earth."
    assert "God" in words and words[words.index("God") + 1] == "created"
    assert strongs[words.index("God")] == {"H430"}  # leading zeros dropped
    assert strongs[words.index(",")] == frozenset()  # punctuation carries no number
    assert "Elohim" not in text


def test_strong_links_of_genesis_1_1_by_hand():
    _, spanish_words, spanish = parse_osis_verse(SPANISH_GEN_1_1)
    _, english_words, english = parse_osis_verse(ENGLISH_GEN_1_1)
    assert spanish_words == ("EN", "el", "principio", "crió", "Dios", "los", "cielos", "y", "la",
                             "tierra", ".")
    # EN el principio (H7225) -> beginning (2); crió (H1254) -> created (5);
    # Dios (H430) -> In (0), God (4), and (8) (the English tags are shifted);
    # los cielos (H8064) -> heavens (7); y la tierra (H776) -> earth (10).
    assert strong_links(spanish, english) == (
        (0, 2), (1, 2), (2, 2), (3, 5), (4, 0), (4, 4), (4, 8), (5, 7), (6, 7), (7, 10),
        (8, 10), (9, 10))


def test_markup_quirks():
    markup = ('<div type="x-milestone" subType="x-preverse" sID="pv1"/><title canonical="true" '
              'type="psalm">A Psalm by David.</title> <lg sID="g1"/><l level="1" sID="g2"/>'
              'Yahweh, <w lemma="strong:H5315 H2416">how</w><l eID="g2" level="1"/>'
              '<l level="2" sID="g3"/>many <transChange type="added">are</transChange> '
              '<q marker="" who="Jesus">“mine”</q>!<title type="x-section">Heading</title>'
              ' &amp; more<note type="x-variant"><rdg>other reading</rdg></note>.')
    text, words, strongs = parse_osis_verse(markup)
    assert text == "A Psalm by David. Yahweh, how many are “mine”! & more."
    assert strongs[words.index("how")] == {"H5315", "H2416"}
    assert "Heading" not in words and "reading" not in words


def test_parse_imp_skips_headings_and_chapter_intros():
    imp = textwrap.dedent(f"""\
        $$$[ Module Heading ]

        $$$Genesis 0:0
        <title level="1" type="main">Génesis</title>
        $$$Genesis 1:0
        <chapter n="1" osisID="Gen.1" sID="Gen.1"/>
        $$$Genesis 1:1
        {SPANISH_GEN_1_1}
        """)
    testaments = {}
    assert list(parse_imp(imp, testaments)) == ["Genesis 1:1"]
    assert testaments == {"Genesis 1:1": 1}
    assert parse_imp("$$$[ Testament 2 Heading ]\n\n$$$John 1:1\nEN el principio\n",
                     testaments) == {"John 1:1": "EN el principio"}
    assert testaments["John 1:1"] == 2


def test_split_is_by_chapter_and_about_five_percent():
    chapters = [(book, chapter) for book in ("Genesis", "Exodus", "Psalms", "Matthew", "Acts")
                for chapter in range(1, 151)]
    splits = [bible_split(*key) for key in chapters]
    assert bible_split("Genesis", 1) == bible_split("Genesis", 1)
    for split in ("dev", "test"):
        assert 0.02 < splits.count(split) / len(splits) < 0.09
    assert set(splits) == {"train", "dev", "test"}


def _chapter_of(split, book="Genesis"):
    return next(chapter for chapter in range(1, 500) if bible_split(book, chapter) == split)


def _pair(split, source, target, verse=1):
    chapter = _chapter_of(split)
    return BiblePair(f"Genesis {chapter}:{verse}", "Genesis", chapter, verse, source, target,
                     tuple(split_words(source)), tuple(split_words(target)), (), split)


def test_remove_train_duplicates_keeps_test_whole():
    pairs = [
        _pair("test", "Y dijo Dios", "God said"),
        _pair("train", "y dijo  dios", "And God spoke", verse=2),  # same source (case, spaces)
        _pair("train", "otra cosa", "God said", verse=3),  # same target
        _pair("train", "otra cosa más", "Something else", verse=4),
    ]
    kept, removed = remove_train_duplicates(pairs)
    assert removed == 2
    assert [pair.verse for pair in kept] == [1, 4]


def _fake_mod2imp(directory, modules):
    """A stand-in `mod2imp` that prints `modules[name]` and fails for other names."""
    for name, text in modules.items():
        with open(os.path.join(directory, f"{name}.imp"), "w", encoding="utf-8") as handle:
            handle.write(text)
    script = os.path.join(directory, "mod2imp")
    with open(script, "w", encoding="utf-8") as handle:
        handle.write(textwrap.dedent(f"""\
            #!/bin/sh
            if [ -f "{directory}/$1.imp" ]; then cat "{directory}/$1.imp"; exit 0; fi
            echo "mod2imp: Couldn't find module: $1" >&2; exit 255
            """))
    os.chmod(script, os.stat(script).st_mode | stat.S_IEXEC)
    return script


def _imp(verses):
    return "$$$[ Module Heading ]\n\n" + "".join(
        f"$$$Genesis {chapter}:{verse}\n{markup}\n" for (chapter, verse), markup in verses.items())


def test_load_bible_pairs_end_to_end_with_a_written_module(tmp_path):
    test_chapter, train_chapter = _chapter_of("test"), _chapter_of("train")
    spanish = {
        (train_chapter, 1): SPANISH_GEN_1_1,
        (train_chapter, 2): "Y la luz era buena.",
        (train_chapter, 3): "Uno dos tres cuatro cinco seis siete ocho nueve diez once doce.",
        (train_chapter, 4): "Solamente en español.",
        (test_chapter, 1): "Y la luz era buena.",  # repeats a training verse
    }
    english = {
        (train_chapter, 1): ENGLISH_GEN_1_1,
        (train_chapter, 2): "The light was good.",
        (train_chapter, 3): "One.",  # numbered differently: 13 words against 2
        (test_chapter, 1): "The light was good.",
        (test_chapter, 2): "Only in English.",
    }
    program = _fake_mod2imp(str(tmp_path), {"spa": _imp(spanish), "eng": _imp(english)})
    pairs, report = load_bible_pairs("spa", "eng", mod2imp=program, return_report=True)
    assert [pair.verse_id for pair in pairs] == [f"Genesis {train_chapter}:1",
                                                 f"Genesis {test_chapter}:1"]
    first = pairs[0]
    assert first.target == "In the beginning, God created the heavens and the earth."
    assert first.links[:3] == ((0, 2), (1, 2), (2, 2)) and first.split == "train"
    assert report == {"verses_only_in_source": 1, "verses_only_in_target": 1,
                      "dropped_length_ratio": 1, "train_duplicates_removed": 1, "pairs": 2,
                      "train_pairs": 1, "dev_pairs": 0, "test_pairs": 1}
    assert [p.verse_id for p in load_bible_pairs("spa", "eng", split="test", mod2imp=program)] \
        == [f"Genesis {test_chapter}:1"]
    kept = load_bible_pairs("spa", "eng", mod2imp=program, max_length_ratio=0, deduplicate=False)
    assert len(kept) == 4


def test_parsed_modules_are_kept_on_disk_keyed_by_the_export(tmp_path, monkeypatch):
    from kerasseq.data import sword

    monkeypatch.setenv("KERASSEQ_CACHE_DIR", str(tmp_path / "cache"))
    verses = {(_chapter_of("train"), 1): ENGLISH_GEN_1_1}
    program = _fake_mod2imp(str(tmp_path), {"eng": _imp(verses)})
    sword._load_module.cache_clear()
    first = sword.load_module("eng", mod2imp=program)
    (cached,) = os.listdir(tmp_path / "cache" / "sword")
    assert cached.startswith("eng-") and cached.endswith(".pickle")
    parsed = []
    monkeypatch.setattr(sword, "_parse_module", lambda text: parsed.append(text) or {})
    sword._load_module.cache_clear()
    assert sword.load_module("eng", mod2imp=program) == first  # read back, not parsed
    assert parsed == []
    # Another export of the module (an updated Debian package) is parsed again.
    _fake_mod2imp(str(tmp_path), {"eng": _imp({**verses, (_chapter_of("train"), 2): "Light."})})
    sword._load_module.cache_clear()
    assert sword.load_module("eng", mod2imp=program) == {} and len(parsed) == 1
    # A damaged cache file is ignored (parsed again), never an error.
    (tmp_path / "cache" / "sword" / cached).write_bytes(b"not a pickle")
    monkeypatch.undo()
    monkeypatch.setenv("KERASSEQ_CACHE_DIR", str(tmp_path / "cache"))
    _fake_mod2imp(str(tmp_path), {"eng": _imp(verses)})
    sword._load_module.cache_clear()
    assert sword.load_module("eng", mod2imp=program) == first
    sword._load_module.cache_clear()


def test_clear_errors(tmp_path):
    with pytest.raises(SwordError, match="libsword-utils"):
        load_bible_pairs(mod2imp=str(tmp_path / "no-such-mod2imp"))
    program = _fake_mod2imp(str(tmp_path), {"eng": _imp({(1, 1): ENGLISH_GEN_1_1})})
    with pytest.raises(SwordError, match="'spaRV1909eb' is not installed.*sword-text-sparv"):
        load_bible_pairs("spaRV1909eb", "eng", mod2imp=program)
    with pytest.raises(SwordError, match="'nosuchmodule' is not installed.*Installed modules"):
        load_bible_pairs("nosuchmodule", "eng", mod2imp=program)
    with pytest.raises(ValueError, match="`split` must be None or one of"):
        load_bible_pairs("eng", "eng", split="valid", mod2imp=program)
    with pytest.raises(ValueError, match="max_length_ratio"):
        load_bible_pairs("eng", "eng", max_length_ratio=0.5, mod2imp=program)


def test_load_pairs_reads_sword_bibles_by_dataset_name(tmp_path, monkeypatch):
    """`load_pairs("sword:SOURCE:TARGET", split)`, what `kerasseq train --dataset`
    reads: the verse pairs of `load_bible_pairs`, split by chapter; a missing
    module or a malformed name is a ValueError naming it."""
    from kerasseq.data import load_pairs

    test_chapter, train_chapter = _chapter_of("test"), _chapter_of("train")
    spanish = {(train_chapter, 1): SPANISH_GEN_1_1, (train_chapter, 2): "Y la luz era buena.",
               (test_chapter, 1): "Y vio Dios la luz."}
    english = {(train_chapter, 1): ENGLISH_GEN_1_1, (train_chapter, 2): "The light was good.",
               (test_chapter, 1): "God saw the light."}
    _fake_mod2imp(str(tmp_path), {"spa": _imp(spanish), "eng": _imp(english)})
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    train, references = load_pairs("sword:spa:eng", "train")
    assert train == [(pair.source, pair.target)
                     for pair in load_bible_pairs("spa", "eng", split="train")]
    assert train[1] == ("Y la luz era buena.", "The light was good.")
    assert references["Y la luz era buena."] == ["The light was good."]
    assert load_pairs("sword:spa:eng", "test")[0] == [("Y vio Dios la luz.", "God saw the light.")]
    assert len(load_pairs("sword:spa:eng", "all")[0]) == 3
    assert load_pairs("sword:spa:eng", "train", limit=1)[0] == train[:1]
    with pytest.raises(ValueError, match="dataset sword:spa:nosuch: .*'nosuch' is not installed"):
        load_pairs("sword:spa:nosuch", "train")
    with pytest.raises(ValueError, match="two SWORD module names"):
        load_pairs("sword:spa", "train")
    with pytest.raises(ValueError, match="split must be train, dev, test or all"):
        load_pairs("sword:spa:eng", "valid")


# --------------------------------------------------------------------------
# The real modules (Debian sword-text-sparv, sword-text-web, libsword-utils).
# --------------------------------------------------------------------------

def _real_modules_or_skip():
    if shutil.which("mod2imp") is None:
        pytest.skip("mod2imp is not installed (Debian libsword-utils; `make examples-data`)")
    try:
        return load_bible_pairs(return_report=True)
    except SwordError as error:
        pytest.skip(f"SWORD modules not installed (`make examples-data`): {error}")


@pytest.fixture(scope="module")
def real_pairs():
    return _real_modules_or_skip()


@pytest.mark.slow
def test_real_modules_pair_about_31k_verses(real_pairs):
    pairs, report = real_pairs
    assert 30_000 < len(pairs) < 31_077
    by_id = {pair.verse_id: pair for pair in pairs}
    genesis = by_id["Genesis 1:1"]
    assert genesis.source == "EN el principio crió Dios los cielos y la tierra."
    assert genesis.target == "In the beginning, God created the heavens and the earth."
    assert genesis.testament == 1 and by_id["John 3:16"].testament == 2
    assert "<" not in "".join(pair.source + pair.target for pair in pairs)
    for split in ("dev", "test"):
        assert 0.04 < report[f"{split}_pairs"] / len(pairs) < 0.07
    chapters = {}
    for pair in pairs:
        chapters.setdefault((pair.book, pair.chapter), set()).add(pair.split)
    assert all(len(splits) == 1 for splits in chapters.values())


@pytest.mark.slow
def test_real_modules_no_test_target_in_train(real_pairs):
    pairs, _ = real_pairs

    def key(text):
        return " ".join(split_words(text.lower()))

    train_targets = {key(pair.target) for pair in pairs if pair.split == "train"}
    assert not [pair for pair in pairs if pair.split == "test" and key(pair.target) in train_targets]
