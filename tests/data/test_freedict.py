import gzip

import pytest

from kerasseq.data.freedict import clean_text, load_freedict_pairs, parse_freedict_lines

# A few entries in the layout of /usr/share/dictd/freedict-deu-eng.dict.dz
# (dictd database, FreeDict edition 1.9-fd1), copied from the real file.
DICTIONARY = """
00-database-dictfmt-1.13.0
German - English Ding/FreeDict dictionary

Ablösung /ˈaplˌøːzʊŋ/ <fem, n, sg>
redemption <n>, repayment <n>
jds. Ablösung /jˌɔtdˌeːˈɛs ˈaplˌøːzʊŋ/ <fem, n, sg>
sb.'s relief <n>
 see: {Ich muss warten, bis meine Ablösung kommt.}

         Note: Person, die als nächstes den Turnusdienst übernimmt
Ich muss warten, bis meine Ablösung kommt. /ɪç mˈʊs vˈaɾtən bɪs mˌaɪnə ˈaplˌøːzʊŋ kˈɔmt/
I have to wait until my relief comes/arrives.
 see: {jds. Ablösung}

Noch ist nicht aller Tage Abend. /nɔx ɪst nˈɪçt ˈalɜ tˈɑːɡə ˈɑːbənt/
It's not over until it's over., It's not / It isn't / It ain't over till the fat lady sings. [Am.]
   Synonym: {Man soll den Tag nicht vor dem Abend loben.}

Wir haben es mit unserem Urlaub gut / schlecht getroffen. /viːɾ hˌɑːbən ɛs/
We got a good/bad deal on our holiday.
das Abhaken von etw. /das ˈaphˌɑːkən fɔn ˈɛtf/
the ticking-off of sth.
Ein Beweis für etw. /aɪn bəvˈaɪs fyːɾ ˈɛtf/
a token of sth.
Achtung! /ˈaxtʊŋ/
 [mil.] Attention!
         Note: order
Achtung! /ˈaxtʊŋ/
 [mil.] Attention!
Also verschaukeln kann ich mich selber! /ˈalzoː fɛɾʃˈaʊkəln/
 [ugs.] You (sure) could have fooled me! [iron.] , And pigs might fly! [Br.]
Hast du vergessen, was wir abgemacht/ausgemacht haben? /hast duː fɛɾɡˈɛsən/
Are you forgetting our deal?
Durch Schwangerschaft wird der Beckenboden beansprucht/belastet. /d??ç ʃvˈaŋɜʃˌaft/
Pregnancy places a great strain on the pelvic floor.
"""

EXPECTED = [
    ("Ich muss warten, bis meine Ablösung kommt.", "I have to wait until my relief comes."),
    ("Noch ist nicht aller Tage Abend.", "It's not over until it's over."),
    ("Achtung!", "Attention!"),
    ("Also verschaukeln kann ich mich selber!", "You sure could have fooled me!"),
    ("Hast du vergessen, was wir abgemacht haben?", "Are you forgetting our deal?"),
    ("Durch Schwangerschaft wird der Beckenboden beansprucht.",
     "Pregnancy places a great strain on the pelvic floor."),
]


@pytest.fixture
def dictionary_file(tmp_path):
    path = tmp_path / "freedict-deu-eng.dict.dz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(DICTIONARY)
    return path


def test_loads_sentence_pairs_from_gzip(dictionary_file):
    assert load_freedict_pairs(dictionary_file) == EXPECTED


def test_max_pairs(dictionary_file):
    assert load_freedict_pairs(dictionary_file, max_pairs=2) == EXPECTED[:2]


def test_plain_text_file(tmp_path):
    path = tmp_path / "freedict-deu-eng.dict"
    path.write_text(DICTIONARY, encoding="utf-8")
    assert load_freedict_pairs(path) == EXPECTED


def test_missing_file_has_install_hint(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install dict-freedict-deu-eng"):
        load_freedict_pairs(tmp_path / "missing.dict.dz")


def test_skips_phrases_abbreviations_and_spaced_slashes():
    pairs = parse_freedict_lines(DICTIONARY.splitlines())
    germans = [german for german, _ in pairs]
    assert not any(g.startswith(("das Abhaken", "Ein Beweis", "Wir haben es")) for g in germans)
    assert len(germans) == len(set(germans))  # the repeated "Achtung!" entry is kept once


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I have to wait until my relief comes/arrives.", "I have to wait until my relief comes."),
        ("Get out!, Get out of here!, Get out of town! [Am.]", "Get out!"),
        ("There's no (such thing as a) free lunch (in this business).",
         "There's no such thing as a free lunch in this business."),
        ("It's not / It isn't over.", None),
        (" [coll.] ", None),
        ("Ganz  allgemein ,  geht es schneller .", "Ganz allgemein, geht es schneller."),
    ],
)
def test_clean_text(text, expected):
    assert clean_text(text) == expected


@pytest.mark.skipif(
    not __import__("os").path.exists("/usr/share/dictd/freedict-deu-eng.dict.dz"),
    reason="dict-freedict-deu-eng is not installed (apt-get install dict-freedict-deu-eng)",
)
@pytest.mark.slow
def test_real_dictionary_has_about_twelve_thousand_pairs():
    pairs = load_freedict_pairs()
    assert 10_000 < len(pairs) < 14_000
    assert ("Ich muss warten, bis meine Ablösung kommt.",
            "I have to wait until my relief comes.") in pairs
