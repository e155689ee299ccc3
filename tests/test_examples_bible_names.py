"""examples/bible_names.py: names found without a name list, and kept or missed, on hand-made verses."""

from tests.test_examples import load_example

SOURCE = "Y aquel hombre respondió: Vamos á Dothán. Entonces José fué tras de Dios."
REFERENCE = "The man said, “Let’s go to Dothan.” Joseph went after God in Dothan."


def test_names_are_capitalised_words_spelt_like_a_source_word():
    module = load_example("bible_names")
    # "The" and "Let’s" start a sentence or a quotation; "God" is not spelt
    # like "Dios"; "Joseph" ~ "José" (0.8) and "Dothan" = "Dothán" without accents
    assert module.names(SOURCE, REFERENCE) == ["Dothan", "Joseph", "Dothan"]
    assert module.names("Chusan-risathaim, rey", "king Cushan Rishathaim") == [
        "Cushan", "Rishathaim"]
    assert module.fold("Dothán") == "dothan"


def test_report_counts_names_kept_exactly(tmp_path, capsys):
    module = load_example("bible_names")
    header = "verse\tsource\treference\tgreedy\tbeam\tbeam_chrf\n"
    rows = [("Gen 1", SOURCE, REFERENCE, "We go to Dothan; Joseph went", "go to Maroth", "1.0"),
            ("Gen 2", "Y dijo.", "And he said.", "He said.", "He said.", "2.0")]
    path = tmp_path / "t.tsv"
    path.write_text(header + "".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    total, summary, picked, garbled = module.report([str(path)], sample=2, seed=0)
    # three names in the reference (Dothan twice); greedy keeps all three
    # (a name is kept when the output has the word), beam none
    assert total == 3
    assert summary == {(str(path), "greedy"): 3, (str(path), "beam"): 0}
    assert picked == [0, 1] and garbled == {str(path): ["Dothan", "Joseph", "Dothan"]}
    assert "0 of 3 names kept" in capsys.readouterr().out
