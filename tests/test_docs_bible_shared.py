"""The shared-vocabulary Bible run: every figure results.md and tutorial_bible.md
quote, recomputed from docs/artefacts/bible_es_en_shared/ (no TensorFlow)."""

import json
import re

from tests.test_docs import DOCS
from tests.test_examples import load_example

RUN = DOCS / "artefacts" / "bible_es_en_shared"
EARLIER = DOCS / "artefacts" / "bible_es_en"


def flat(path):
    return " ".join((DOCS / path).read_text(encoding="utf-8").split())


def record():
    return json.loads((RUN / "results.json").read_text())["models"]["transformer"]


def test_scores_are_the_run_s():
    run, page, tutorial = record(), flat("results.md"), flat("tutorial_bible.md")
    history = json.loads((RUN / "transformer" / "history.json").read_text())
    assert {key: run[key] for key in ("steps", "parameters")} == {
        key: history[key] for key in ("steps", "parameters")}
    batches = [int(count) for count in history["history"]["batches"]]
    assert run["steps"] == sum(batches) and batches[-1] < run["batches_per_epoch"]
    dev = history["history"]["dev_bleu"]
    beam = run["dev_bleu_beam_by_length_penalty"]
    rows = [
        f"| parameters | 7,855,943 | {run['parameters']:,} |",
        f"| optimizer steps in 90 minutes | 3,813 (derived from its log) | {run['steps']:,} "
        f"({len(batches) - 1} epochs and {batches[-1]} of {run['batches_per_epoch']} batches) |",
        f"| dev BLEU greedy: best epoch / mean of the last 5 (kept) | 31.49 / 32.75 | "
        f"{run['dev_bleu_greedy_best_epoch']:.2f} / {run['dev_bleu_greedy_averaged']:.2f} |",
        f"| dev BLEU beam 4, length penalty 0 / 1.0 | 33.31 / 34.50 | {beam['0.0']:.2f} / "
        f"{beam['1.0']:.2f} |",
        f"| **test BLEU beam 4** (length penalty 1.0) | 32.39 | **{run['test_bleu_beam']:.2f}** |",
        f"| test BLEU greedy | 30.72 | {run['test_bleu_greedy']:.2f} |",
        f"| test chrF beam 4 / greedy | 53.16 / 51.57 | {run['test_chrf_beam']:.2f} / "
        f"{run['test_chrf_greedy']:.2f} |",
        f"still added {dev[-1] - dev[-2]:.2f}.",
        f"met: {run['test_bleu_beam'] - 33:.2f} above",
        f"**meets it: {run['test_bleu_beam']:.2f} with beam search, "
        f"{run['test_bleu_greedy']:.2f} greedy**",
    ]
    for row in rows:
        assert row in page, row
    assert run["length_penalty"] == 1.0 and run["averaged"] is True
    assert f"{run['steps']:,} optimizer steps, scored **{run['test_bleu_beam']:.2f} test BLEU" \
        in tutorial
    assert (f"(chrF {run['test_chrf_beam']:.2f}; greedy {run['test_bleu_greedy']:.2f} BLEU, "
            f"chrF {run['test_chrf_greedy']:.2f})") in tutorial
    for text in (tutorial, page):  # the steps that repeat the run on another machine
        assert f"--max-steps {run['steps']}" in text


def test_guard_table_and_test_counts_are_the_run_s():
    run, page = record(), flat("results.md")
    for size, row in run["dev_beam_by_no_repeat_ngram_size"].items():
        label = f"{size} (off)" if size == "0" else size
        assert (f"| {label} | {row['bleu']:.2f} | {row['repeated_words']} | "
                f"{row['word_loops']} |") in page
    chosen, counts = run["no_repeat_ngram_size"], run["test_repetitions"]
    assert f"Dev chose {chosen} by" in page
    beam, greedy = counts["beam"], counts["greedy"]
    guarded, greedy_guarded = counts["beam_guarded"], counts["greedy_guarded"]
    assert (f"beam {guarded['bleu']:.2f} BLEU ({guarded['bleu'] - beam['bleu']:+.2f}) "
            .replace("-", "−") + f"with {guarded['repeated_words']} outputs repeating a word "
            f"and {guarded['word_loops']} looping ({beam['repeated_words']} and "
            f"{beam['word_loops']} without)") in page
    assert (f"greedy {greedy_guarded['bleu']:.2f} "
            f"({greedy_guarded['bleu'] - run['test_bleu_greedy']:+.2f})".replace("-", "−")
            + f" with {greedy_guarded['repeated_words']} and {greedy_guarded['word_loops']} "
            f"({greedy['repeated_words']} and {greedy['word_loops']} without)") in page
    assert (f"the new model's {greedy['repeated_words']} and {greedy['word_loops']} greedy, "
            f"{beam['repeated_words']} and {beam['word_loops']} with beam") in page
    timings = run["test_decode_timings"]
    assert (f"took {timings['greedy_seconds']} s greedy, {timings['beam_seconds']} s with 4 "
            f"beams and {timings['beam_guarded_seconds']} s") in page


def test_names_are_counted_from_the_translations(capsys):
    names = load_example("bible_names")
    total, summary, picked, garbled = names.report(
        [str(EARLIER / "transformer" / "test_translations.tsv"),
         str(RUN / "transformer" / "test_translations.tsv")], sample=20, seed=0)
    capsys.readouterr()
    page, tutorial = flat("results.md"), flat("tutorial_bible.md")
    old = {output: hits for (path, output), hits in summary.items() if "shared" not in path}
    new = {output: hits for (path, output), hits in summary.items() if "shared" in path}
    assert (f"| names kept, beam / greedy (`examples/bible_names.py`, {total:,} names) | "
            f"{old['beam']} / {old['greedy']} | {new['beam']} / {new['greedy']} |") in page
    assert (f"keeps {new['beam']} with beam search ({100 * new['beam'] / total:.1f} %) against "
            f"{old['beam']} ({100 * old['beam'] / total:.1f} %)") in page
    assert f"spelt {new['beam']} of the test split's {total:,} names exactly against " \
           f"{old['beam']}" in tutorial
    assert [len(missed) for missed in garbled.values()] == [3, 3]
    assert re.search(r"On 20 verses drawn with seed 0 \(15 names\), both models miss 3", page)
