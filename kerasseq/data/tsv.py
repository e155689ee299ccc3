"""Sentence pairs from tab-separated files (Anki / Tatoeba `manythings.org` style).

A typical line is `Go.\\tVe.\\tCC-BY 2.0 (France) Attribution: tatoeba.org ...`:
source sentence, target sentence, then columns kerasseq ignores.
"""

import os

from kerasseq._validation import check_int, check_positive_int

ON_BAD_LINE = ("error", "skip")


def load_tsv_pairs(
    path,
    source_column=0,
    target_column=1,
    max_pairs=None,
    skip_header=False,
    on_bad_line="error",
):
    """Read `(source, target)` text pairs from a UTF-8 tab-separated file.

    Blank lines (only whitespace) are skipped. Each field is stripped of
    surrounding whitespace; a trailing `\\r` (Windows line ends) goes with it.

    Args:
        path: str or `os.PathLike`, the file to read.
        source_column: int >= 0, 0-based column of the source text.
        target_column: int >= 0, 0-based column of the target text.
        max_pairs: optional int >= 1; stop after this many pairs (the first
            ones in the file).
        skip_header: bool, ignore the first line of the file.
        on_bad_line: what to do with a line that has too few columns or is
            not valid UTF-8: `"error"` raises a `ValueError` naming the file
            and the line number, `"skip"` ignores the line.

    Returns:
        list of `(source_text, target_text)` str tuples, in file order.

    Example:

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "spa.txt")
    >>> _ = open(path, "w", encoding="utf-8").write("Go.\\tVe.\\tCC-BY 2.0\\n\\nHi.\\tHola.\\n")
    >>> load_tsv_pairs(path)
    [('Go.', 'Ve.'), ('Hi.', 'Hola.')]
    """
    for name, value in (
        ("source_column", source_column),
        ("target_column", target_column),
    ):
        check_int(name, value, 0)
    if max_pairs is not None:
        check_positive_int("max_pairs", max_pairs)
    if on_bad_line not in ON_BAD_LINE:
        raise ValueError(
            f"`on_bad_line` must be one of {ON_BAD_LINE}. Received: on_bad_line={on_bad_line!r}"
        )
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No TSV file at path={path!r}.")

    needed_columns = max(source_column, target_column) + 1
    pairs = []
    with open(path, "rb") as file:
        for line_number, raw_line in enumerate(file, start=1):
            if skip_header and line_number == 1:
                continue
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError as error:
                if on_bad_line == "skip":
                    continue
                raise ValueError(
                    f"{path}, line {line_number}: not valid UTF-8 (byte "
                    f"{raw_line[error.start]:#04x} at column {error.start + 1}). Re-encode the "
                    "file as UTF-8, or pass on_bad_line='skip' to ignore such lines."
                ) from None
            if not line.strip():
                continue
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) < needed_columns:
                if on_bad_line == "skip":
                    continue
                raise ValueError(
                    f"{path}, line {line_number}: expected at least {needed_columns} "
                    f"tab-separated columns (source_column={source_column}, "
                    f"target_column={target_column}), found {len(fields)}: {line.rstrip()!r:.200}. "
                    "Pass on_bad_line='skip' to ignore such lines."
                )
            pairs.append((fields[source_column].strip(), fields[target_column].strip()))
            if max_pairs is not None and len(pairs) >= max_pairs:
                break
    return pairs
