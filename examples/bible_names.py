"""Are names translated? Proper names of the Bible test split, read from translations files.

    .venv/bin/python examples/bible_names.py \
        docs/artefacts/bible_es_en/transformer/test_translations.tsv runs/bible/transformer/...

Names are spelt alike in the two Bibles (Dothán / Dothan, Chusan-risathaim /
Cushan Rishathaim), so a name can be found without a name list: a word of
the English reference is a *name* when it is capitalised, is not the first
word of a sentence (or of a quotation), and the Spanish source holds a word
that matches it (accents removed, lower-cased, `difflib` similarity at
least 0.75). "Israel" counts; "God" (Dios) and "Yahweh" (Jehová) do not.

For each file (`test_translations.tsv` of examples/spanish_to_english_bible.py)
and each of its outputs (greedy and beam) it prints the names kept: those
that the output spells exactly as the reference does. It also lists the
names of `--sample` verses drawn with `--seed` (the same verses for every
file), with each output's spelling, for reading by eye.

Stdlib only: no TensorFlow.
"""

import argparse
import difflib
import random
import re
import unicodedata

WORD = re.compile(r"[^\W\d_]+(?:[-’'][^\W\d_]+)*")
SENTENCE_START = re.compile(r"(^|[.!?:;“‘\"(]\s*)$")


def fold(word):
    """Lower-case without accents: "Dothán" -> "dothan"."""
    text = unicodedata.normalize("NFD", word.lower())
    return "".join(char for char in text if unicodedata.category(char) != "Mn")


def names(source, reference, threshold=0.75):
    """The words of `reference` taken for names (see the module docstring), in order."""
    source_words = {fold(part) for word in WORD.findall(source) for part in word.split("-")}
    found = []
    for match in WORD.finditer(reference):
        word = match.group()
        if not word[0].isupper() or SENTENCE_START.search(reference[:match.start()]):
            continue
        key = fold(word)
        if any(difflib.SequenceMatcher(None, key, other).ratio() >= threshold
               for other in source_words if abs(len(other) - len(key)) <= 3):
            found.append(word)
    return found


def kept(name, output):
    return name in WORD.findall(output)


def read_tsv(path):
    with open(path, encoding="utf-8") as handle:
        header, *lines = handle.read().splitlines()
    columns = header.split("\t")
    for required in ("verse", "source", "reference", "greedy", "beam"):
        if required not in columns:
            raise SystemExit(f"{path}: no {required!r} column (header {header!r})")
    return [dict(zip(columns, line.split("\t"), strict=True)) for line in lines]


def report(paths, sample=20, seed=0):
    tables = {path: read_tsv(path) for path in paths}
    first = next(iter(tables.values()))
    verse_names = [names(row["source"], row["reference"]) for row in first]
    total = sum(len(found) for found in verse_names)
    print(f"{total} names in {sum(bool(found) for found in verse_names)} of {len(first)} verses")
    summary = {}
    for path, rows in tables.items():
        if [row["verse"] for row in rows] != [row["verse"] for row in first]:
            raise SystemExit(f"{path}: not the same verses as {paths[0]}")
        for output in ("greedy", "beam"):
            hits = sum(kept(name, row[output]) for row, found in zip(rows, verse_names, strict=True)
                       for name in found)
            summary[(path, output)] = hits
            print(f"{path} {output}: {hits} of {total} names kept ({100 * hits / total:.1f} %)")
    picked = sorted(random.Random(seed).sample(range(len(first)), sample))
    print(f"\n{sample} verses drawn with seed {seed} "
          f"({sum(len(verse_names[index]) for index in picked)} names):")
    garbled = {path: [] for path in tables}
    for index in picked:
        print(f"{first[index]['verse']}: names {verse_names[index] or '-'}")
        for path, rows in tables.items():
            missing = [name for name in verse_names[index] if not kept(name, rows[index]["beam"])]
            garbled[path] += missing
            if missing:
                print(f"    {path} beam misses {missing}: {rows[index]['beam']}")
    for path, missing in garbled.items():
        print(f"{path} beam: {len(missing)} names missed in the {sample} verses")
    return total, summary, picked, garbled


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", help="test_translations.tsv files of the same verses")
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    return report(args.paths, args.sample, args.seed)


if __name__ == "__main__":
    main()
