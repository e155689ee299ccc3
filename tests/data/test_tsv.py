import pytest

from kerasseq.data.tsv import load_tsv_pairs

CONTENT = (
    "Go.\tVe.\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272\n"
    "\n"
    "Hi.\tHola.\tCC-BY 2.0\r\n"
    "Größe?\tমাপ?\n"
)


@pytest.fixture
def tsv_file(tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_text(CONTENT, encoding="utf-8")
    return path


def test_reads_pairs_skips_blank_lines(tsv_file):
    assert load_tsv_pairs(tsv_file) == [
        ("Go.", "Ve."),
        ("Hi.", "Hola."),
        ("Größe?", "মাপ?"),
    ]


def test_columns_max_pairs_and_header(tsv_file):
    assert load_tsv_pairs(tsv_file, source_column=1, target_column=0, max_pairs=2) == [
        ("Ve.", "Go."),
        ("Hola.", "Hi."),
    ]
    assert load_tsv_pairs(tsv_file, skip_header=True) == [
        ("Hi.", "Hola."),
        ("Größe?", "মাপ?"),
    ]


def test_bad_line_error_and_skip(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text("a\tb\nonly one column\nc\td\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.tsv, line 2"):
        load_tsv_pairs(path)
    assert load_tsv_pairs(path, on_bad_line="skip") == [("a", "b"), ("c", "d")]
    with pytest.raises(ValueError, match="on_bad_line"):
        load_tsv_pairs(path, on_bad_line="warn")


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.tsv"
    with pytest.raises(FileNotFoundError, match="nope.tsv"):
        load_tsv_pairs(missing)


def test_invalid_utf8_names_the_file_and_line(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes("a\tb\n".encode() + "caf\xe9\tcoffee\n".encode("latin-1") + b"c\td\n")
    with pytest.raises(ValueError, match=r"latin1.tsv, line 2: not valid UTF-8 \(byte 0xe9 at column 4\)"):
        load_tsv_pairs(path)
    assert load_tsv_pairs(path, on_bad_line="skip") == [("a", "b"), ("c", "d")]
