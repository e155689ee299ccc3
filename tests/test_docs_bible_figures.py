"""The Bible run's figures on the docs pages are those of its committed files.

docs/tutorial_bible.md, docs/guided_alignment.md and docs/results.md quote
BLEU, chrF, epochs, minutes, alignment scores and timings of the full run
whose files are under docs/artefacts/bible_es_en/: results.json, each model's
history.json, train.log and test_translations.tsv, alignments.json and
alignments_table.txt. Each test recomputes figures from those files and
asserts that the page states them, to the digits it shows, in their sentence
or table row, so that a figure changed on a page (or in the files) fails.

Reading the logs: Keras's epoch time in train.log (`441/441 - 721s`) includes
the dev translation the example times on its own (`dev BLEU 3.54 (85 s)`),
while `fit_minutes` is read before that dev translation (the example's
`FitClock`); `test_artefacts_agree_with_each_other` checks that the two clocks
agree on this. An epoch "without its dev translation" is the difference. The
time limit (90 minutes) cuts every model's last epoch; a cut epoch counts as
its training minutes over the median of the model's full epochs'.

Numbers are rounded half up from their decimal form, as a reader rounds the
JSON's 90.35 to 90.4 (Python's format would give 90.3: the float is a little
below 90.35). No TensorFlow: the test reads text files only.
"""

import json
import re
import statistics
import struct
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
ARTEFACTS = DOCS / "artefacts" / "bible_es_en"
MODELS = ("transformer", "rnn_attention", "transformer_guided")
TIME_LIMIT_MINUTES = 90  # --time-limit-minutes of every run (results.md's commands)
MINUS = "\u2212"


def fmt(value, digits):
    """`value` rounded half up to `digits` decimals, as a string."""
    quantum = Decimal(1).scaleb(-digits)
    return str(Decimal(repr(float(value))).quantize(quantum, rounding=ROUND_HALF_UP))


def signed(value, digits):
    text = fmt(abs(value), digits)
    return ("+" if value >= 0 else MINUS) + text


def minutes(seconds):
    return fmt(seconds / 60, 1)


def page(name):
    """The page's text with every run of whitespace made one space."""
    return " ".join((DOCS / name).read_text(encoding="utf-8").split())


def assert_states(name, *phrases):
    text = page(name)
    missing = [phrase for phrase in phrases if phrase not in text]
    assert not missing, f"{name} does not state: " + " | ".join(missing)


def table_rows(name, header):
    """The rows (lists of cells) of the table of page `name` whose header line is `header`."""
    lines = (DOCS / name).read_text(encoding="utf-8").splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


# --- the artefacts -------------------------------------------------------------------------

def load_results():
    return json.loads((ARTEFACTS / "results.json").read_text(encoding="utf-8"))


RESULTS = load_results()["models"]
ALIGNMENTS = json.loads((ARTEFACTS / "alignments.json").read_text(encoding="utf-8"))
EPOCH_LINE = re.compile(r"^(\d+)/(\d+) - (\d+)s - .*fit_minutes: ([\d.]+) - dev_bleu: ([\d.]+)$",
                        re.MULTILINE)
DEV_LINE = re.compile(r"^  epoch (\d+): dev BLEU ([\d.]+) \((\d+) s\)$", re.MULTILINE)


def train_log(name):
    """`{"epoch_seconds", "dev_seconds", "batches", "vocabulary", ...}` from NAME/train.log."""
    text = (ARTEFACTS / name / "train.log").read_text(encoding="utf-8")
    epochs = EPOCH_LINE.findall(text)
    devs = DEV_LINE.findall(text)
    assert len(epochs) == len(devs) > 0, name
    assert [int(epoch) for epoch, _, _ in devs] == list(range(1, len(devs) + 1))
    vocabulary = re.search(r"WordPiece: (\d+) Spanish / (\d+) English ids", text)
    return {"epoch_seconds": [int(seconds) for _, _, seconds, _, _ in epochs],
            "dev_seconds": [int(seconds) for _, _, seconds in devs],
            "dev_bleu": [float(bleu) for _, bleu, _ in devs],
            "fit_minutes": [float(value) for *_, value, _ in epochs],
            "batches": {int(total) for _, total, _, _, _ in epochs},
            "vocabulary": (int(vocabulary[1]), int(vocabulary[2]))}


def epochs(name):
    """Durations (seconds) of one model's epochs, from its train.log, and its epoch count."""
    log = train_log(name)
    with_dev, dev = log["epoch_seconds"], log["dev_seconds"]
    training = [total - scoring for total, scoring in zip(with_dev, dev, strict=True)]
    median = statistics.median(training[:-1])  # the full epochs: every one but the cut last
    return {"with_dev": with_dev[:-1], "dev": dev[:-1], "training": training[:-1],
            "cut": training[-1], "median": median, "fraction": training[-1] / median,
            "count": len(training) - 1 + training[-1] / median}


def span(values, convert=minutes):
    return f"{convert(min(values))}–{convert(max(values))}"


def alignment_table(path=ARTEFACTS / "alignments_table.txt"):
    """`{aligner: [precision, recall, F1, AER, hit rate, NT F1, NT AER, NT hit, 1-to-1]}`
    of a committed `alignments.md` of `bible_alignments.py`."""
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] != "aligner":
            rows[cells[0]] = cells[1:]
    return rows


TABLE = alignment_table()
COLUMNS = ("precision", "recall", "F1", "AER", "hit rate", "NT F1", "NT AER", "NT hit rate",
           "1-to-1 hit rate")


def cells(aligner, *columns):
    return [TABLE[aligner][COLUMNS.index(column)] for column in columns]


def f1(aligner):
    return ALIGNMENTS["scores"][aligner]["f1"]


EFLOMAL = "eflomal grow-diag-final-and"
UNGUIDED_MEAN = "transformer (all layers and heads averaged)"
GUIDED_HEAD = "transformer_guided (guided head: layer 1 head 0)"


# --- the helpers and the artefacts themselves ----------------------------------------------

def test_numbers_are_rounded_half_up_from_their_decimal_form():
    assert fmt(90.35, 1) == "90.4" and f"{90.35:.1f}" == "90.3"
    assert fmt(639 / 60, 1) == "10.7" and fmt(0.0498096, 3) == "0.050"
    assert fmt(54.6, 0) == "55" and signed(-0.4415, 2) == MINUS + "0.44"
    assert signed(2.3276, 2) == "+2.33"


def test_artefacts_agree_with_each_other():
    for name in MODELS:
        history = json.loads((ARTEFACTS / name / "history.json").read_text(encoding="utf-8"))
        assert history["history"] == RESULTS[name]["history"]
        log = train_log(name)
        assert log["batches"] == {441}
        assert log["vocabulary"] == (5863, 4679)
        assert log["dev_bleu"] == [float(fmt(b, 2)) for b in history["history"]["dev_bleu"]]
        fit_minutes = history["history"]["fit_minutes"]
        assert log["fit_minutes"] == fit_minutes
        # fit_minutes (read before an epoch's dev translation) = Keras's epoch times so
        # far less this epoch's dev translation, to the seconds' rounding.
        for k, value in enumerate(fit_minutes):
            expected = sum(log["epoch_seconds"][:k + 1]) - log["dev_seconds"][k]
            assert abs(value * 60 - expected) <= 0.5 * (k + 1) + 1.5, (name, k)
        # The time limit fell inside the last epoch: the epoch before ended (with its dev
        # translation) in time for a full epoch to overrun it, and training stopped after it.
        run = epochs(name)
        last_start = fit_minutes[-2] + log["dev_seconds"][-2] / 60
        assert fit_minutes[-1] >= TIME_LIMIT_MINUTES > last_start
        assert last_start + run["median"] / 60 > TIME_LIMIT_MINUTES
    for aligner, row in TABLE.items():
        scores = ALIGNMENTS["scores"][aligner]
        values = [scores["precision"], scores["recall"], scores["f1"], scores["aer"],
                  scores["hit_rate"], scores["new_testament"]["f1"],
                  scores["new_testament"]["aer"], scores["hit_rate_new_testament"],
                  scores["hit_rate_one_to_one"]]
        assert row == [fmt(value, 3) for value in values], aligner
    assert set(TABLE) == set(ALIGNMENTS["scores"])


# --- training: epochs, minutes, dev BLEU ---------------------------------------------------

def test_vocabulary_and_data_sizes():
    spanish, english = train_log("transformer")["vocabulary"]
    data = load_results()["data"]
    assert_states("tutorial_bible.md", f"learns {spanish:,} and {english:,} on all "
                  f"{data['train_pairs']:,}")
    assert_states("results.md", f"{data['pairs']:,} pairs",
                  f"{data['train_pairs']:,} train, {data['dev_pairs']:,} dev and "
                  f"{data['test_pairs']:,} test verses",
                  f"({data['train_duplicates_removed']} training verses that repeat",
                  f"{data['dropped_length_ratio']} pairs with a word-count ratio",
                  f"{spanish:,} Spanish (lower-cased) and {english:,} English (cased) ids")


def test_epoch_durations_and_cut_epochs():
    transformer, rnn, guided = (epochs(name) for name in MODELS)
    one_epoch = (f"took {span(transformer['with_dev'])} minutes, of which "
                 f"{span(transformer['dev'])} went to translating the dev verses "
                 f"({span(transformer['training'])} minutes without them")
    assert_states("tutorial_bible.md", "An epoch (441 batches) " + one_epoch,
                  f"cut the ninth epoch after {minutes(transformer['cut'])} minutes of training, "
                  f"about two-thirds of a full epoch's {minutes(transformer['median'])}",
                  f"the 90 minutes held {fmt(transformer['count'], 1)} epochs",
                  f"({span(rnn['with_dev'])} minutes:",
                  f"cut its fifth epoch after {minutes(rnn['cut'])} minutes of training, about "
                  f"half of a full epoch's {minutes(rnn['median'])}",
                  f"saw {fmt(rnn['count'], 1)} epochs",
                  f"Its epochs took longer ({span(guided['with_dev'])} minutes), so its 90 "
                  f"minutes held {fmt(guided['count'], 1)} epochs")
    assert abs(transformer["fraction"] - 2 / 3) < 0.05 and abs(rnn["fraction"] - 0.5) < 0.05
    assert_states("results.md", "An epoch (441 batches of 64) " + one_epoch,
                  f"| 7,855,943 | {fmt(RESULTS['transformer']['history']['fit_minutes'][-1], 1)}"
                  f" | {fmt(transformer['count'], 1)} |",
                  f"| 7,855,943 | {fmt(RESULTS['transformer_guided']['history']['fit_minutes'][-1], 1)}"
                  f" | {fmt(guided['count'], 1)} |",
                  f"| 8,595,016 | {fmt(RESULTS['rnn_attention']['history']['fit_minutes'][-1], 1)}"
                  f" | {fmt(rnn['count'], 1)} |",
                  f"The Transformer's ninth epoch trained {minutes(transformer['cut'])} minutes "
                  f"against a full epoch's {minutes(transformer['median'])}, the guided "
                  f"Transformer's eighth {minutes(guided['cut'])} against "
                  f"{minutes(guided['median'])}, the RNN's fifth {minutes(rnn['cut'])} against "
                  f"{minutes(rnn['median'])}.",
                  f"It trained {fmt(guided['count'], 1)} epochs in "
                  f"{fmt(RESULTS['transformer_guided']['history']['fit_minutes'][-1], 1)} minutes:"
                  f" its seven full epochs took {span(guided['with_dev'])} minutes each with their"
                  f" dev translation ({span(guided['training'])} without), against the unguided "
                  f"run's {span(transformer['with_dev'])} ({span(transformer['training'])})",
                  f"cut the ninth epoch after {minutes(transformer['cut'])} minutes of training, "
                  f"so the run holds {fmt(transformer['count'], 1)} epochs",
                  f"cut the fifth epoch after {minutes(rnn['cut'])} minutes of training, about "
                  f"half a full epoch: {fmt(rnn['count'], 1)} epochs",
                  "Its four full epochs took " + ", ".join(
                      minutes(s) for s in rnn["with_dev"][:-1]) + f" and "
                  f"{minutes(rnn['with_dev'][-1])} minutes with their dev translation",
                  f"At the pace of the fastest epoch ({minutes(min(transformer['with_dev']))} "
                  f"minutes), 90 minutes would have held "
                  f"{TIME_LIMIT_MINUTES * 60 // min(transformer['with_dev'])} epochs instead of "
                  f"{fmt(transformer['count'], 1)}")
    assert_states("guided_alignment.md", f"over its {fmt(guided['count'], 1)} epochs",
                  f"after {fmt(guided['count'], 1)} epochs against")


def test_dev_bleu_after_each_epoch():
    def listing(values, digits):
        return ", ".join(fmt(v, digits) for v in values[:-1]) + " and " + fmt(values[-1], digits)

    transformer, rnn, guided = (RESULTS[name]["history"] for name in MODELS)
    assert_states("tutorial_bible.md",
                  "after each epoch: " + ", ".join(fmt(v, 1) for v in transformer["dev_bleu"])
                  + ", at " + listing(transformer["fit_minutes"], 1) + " minutes",
                  "its dev BLEU after each was " + listing(rnn["dev_bleu"], 1) + ", at "
                  + listing(rnn["fit_minutes"], 1) + " minutes")
    assert_states("results.md",
                  "after each epoch: " + ", ".join(fmt(v, 2) for v in transformer["dev_bleu"])
                  + ", at " + listing(transformer["fit_minutes"], 1) + " minutes of `fit`",
                  "The RNN's greedy dev BLEU: " + listing(rnn["dev_bleu"], 2) + ", at "
                  + listing(rnn["fit_minutes"], 1) + " minutes",
                  "The guided Transformer's greedy dev BLEU: " + listing(guided["dev_bleu"], 2)
                  + " at " + listing(guided["fit_minutes"], 1) + " minutes",
                  f"Dev loss fell from {fmt(transformer['val_loss'][0], 2)} to "
                  f"{fmt(transformer['val_loss'][-1], 2)}",
                  f"Its dev loss fell from {fmt(rnn['val_loss'][0], 2)} to "
                  f"{fmt(rnn['val_loss'][-1], 2)}",
                  f"(0.1 × {fmt(guided['alignment_loss'][-1], 2)} at the end)",
                  f"{fmt(guided['val_loss'][-1], 2)} after the last epoch, against "
                  f"{fmt(transformer['val_loss'][-1], 2)}",
                  f"Dev BLEU rose by {fmt(transformer['dev_bleu'][-1] - transformer['dev_bleu'][-3], 1)}"
                  " over the last two epochs",
                  f"at equal epochs (4) it is at {fmt(rnn['dev_bleu'][3], 1)} where the "
                  f"Transformer was at {fmt(transformer['dev_bleu'][3], 1)}",
                  f"({fmt(rnn['dev_bleu'][-1], 1)} against {fmt(transformer['dev_bleu'][-1], 1)}"
                  " dev BLEU at 90 minutes)")
    assert_states("guided_alignment.md", f"{fmt(guided['alignment_loss'][0], 2)} to "
                  f"{fmt(guided['alignment_loss'][-1], 2)} over its")


def test_the_steepness_of_the_last_epochs():
    gains = {}
    for name in ("rnn_attention", "transformer"):
        history = RESULTS[name]["history"]
        gains[name] = (fmt(history["dev_bleu"][-1] - history["dev_bleu"][-2], 2),
                       fmt(history["fit_minutes"][-1] - history["fit_minutes"][-2], 1))
    (rnn_bleu, rnn_minutes), (transformer_bleu, transformer_minutes) = gains.values()
    assert_states("tutorial_bible.md",
                  f"Over its last epoch the RNN gained {rnn_bleu} BLEU in {rnn_minutes} minutes, "
                  f"the Transformer {transformer_bleu} in {transformer_minutes} minutes")
    assert_states("results.md", f"({rnn_bleu} in its last {rnn_minutes} minutes)")
    assert float(rnn_bleu) / float(rnn_minutes) * 10 > 1  # "more than a point per ten minutes"


def test_guided_minus_unguided_dev_bleu_per_epoch():
    unguided = RESULTS["transformer"]["history"]["dev_bleu"]
    guided = RESULTS["transformer_guided"]["history"]["dev_bleu"]
    differences = [g - u for g, u in zip(guided, unguided[:len(guided)], strict=True)]
    behind = [epoch for epoch, difference in enumerate(differences, 1) if difference < 0]
    assert behind == [2]  # "ahead ... at every epoch but the second"
    assert max(differences) == pytest.approx(2.53, abs=0.005)
    listed = ", ".join(signed(d, 2) for d in differences[:-1]) + " and " + signed(
        differences[-1], 2)
    ends = (f"{fmt(guided[-1], 2)} after {fmt(epochs('transformer_guided')['count'], 1)} epochs "
            f"against {fmt(unguided[-1], 2)} after {fmt(epochs('transformer')['count'], 1)}")
    assert_states("guided_alignment.md", "at every epoch but the second: guided minus unguided, "
                  + listed + " after epochs 1 to 8", "ended with " + ends)
    assert_states("results.md", "at every epoch but the second: guided minus unguided, " + listed,
                  f"it stood {fmt(guided[-1] - unguided[-1], 2)} ahead ("
                  f"{fmt(guided[-1], 2)} after {fmt(epochs('transformer_guided')['count'], 1)} "
                  f"epochs, {fmt(unguided[-1], 2)} after {fmt(epochs('transformer')['count'], 1)})")


# --- test scores ---------------------------------------------------------------------------

def test_test_scores():
    t, r, g = (RESULTS[name] for name in MODELS)
    assert_states("tutorial_bible.md",
                  f"| Transformer (3+3 layers, {fmt(t['parameters'] / 1e6, 1)} M parameters) | "
                  f"greedy | {fmt(t['test_bleu_greedy'], 2)} | {fmt(t['test_chrf_greedy'], 2)} | "
                  f"{fmt(t['test_decode_timings']['greedy_seconds'], 0)} s |",
                  f"| | beam search, 4 beams, length penalty {t['length_penalty']} | "
                  f"**{fmt(t['test_bleu_beam'], 2)}** | {fmt(t['test_chrf_beam'], 2)} | "
                  f"{fmt(t['test_decode_timings']['beam_seconds'], 0)} s |",
                  f"GRU decoder ({fmt(r['parameters'] / 1e6, 1)} M parameters) | greedy | "
                  f"{fmt(r['test_bleu_greedy'], 2)} | {fmt(r['test_chrf_greedy'], 2)} | "
                  f"{fmt(r['test_decode_timings']['greedy_seconds'], 0)} s |",
                  f"| | beam search, 4 beams, length penalty {r['length_penalty']:g} | "
                  f"**{fmt(r['test_bleu_beam'], 2)}** | {fmt(r['test_chrf_beam'], 2)} | "
                  f"{fmt(r['test_decode_timings']['beam_seconds'], 0)} s |",
                  f"({fmt(t['dev_bleu_greedy_averaged'], 2)} against "
                  f"{fmt(t['dev_bleu_greedy_best_epoch'], 2)} greedy BLEU)",
                  f"(beam {fmt(t['dev_bleu_beam_by_length_penalty']['1.0'], 2)} against "
                  f"{fmt(t['dev_bleu_beam_by_length_penalty']['0.0'], 2)} with 0)",
                  f"scored {fmt(r['dev_bleu_greedy_averaged'], 1)} dev BLEU against "
                  f"{fmt(r['dev_bleu_greedy_best_epoch'], 1)}",
                  f"({fmt(r['dev_bleu_beam_by_length_penalty']['0.0'], 2)} against "
                  f"{fmt(r['dev_bleu_beam_by_length_penalty']['1.0'], 2)})",
                  f"**missed by {fmt(33 - t['test_bleu_beam'], 2)}**",
                  f"guided alignment scored {fmt(g['test_bleu_beam'], 2)} with beam search and "
                  f"{fmt(g['test_bleu_greedy'], 2)} greedy",
                  f"The RNN, {fmt(t['test_bleu_beam'] - r['test_bleu_beam'], 2)} BLEU behind")
    assert_states("guided_alignment.md",
                  f"test BLEU {fmt(g['test_bleu_beam'], 2)} with beam search against the unguided"
                  f" model's {fmt(t['test_bleu_beam'], 2)} ({fmt(g['test_bleu_greedy'], 2)} "
                  f"against {fmt(t['test_bleu_greedy'], 2)} greedy), a loss of "
                  f"{fmt(t['test_bleu_beam'] - g['test_bleu_beam'], 2)} BLEU")

    def row(label, scores):
        averaged = scores["averaged"]
        kept = (f"mean of epochs {int(scores['averaged_epochs'][0][6:9])}–"
                f"{int(scores['averaged_epochs'][-1][6:9])}" if averaged
                else f"epoch {scores['best_epoch']} (the last)")
        dev = scores["dev_bleu_greedy_averaged" if averaged else "dev_bleu_greedy_best_epoch"]
        return (f"| {label} | {scores['parameters']:,} | "
                f"{fmt(scores['history']['fit_minutes'][-1], 1)} | {fmt(epochs_of[label], 1)} | "
                f"{kept} | {fmt(dev, 2)} | {scores['length_penalty'] or 0} | "
                f"{fmt(scores['test_bleu_greedy'], 2)} | **{fmt(scores['test_bleu_beam'], 2)}** | "
                f"{fmt(scores['test_chrf_greedy'], 2)} | {fmt(scores['test_chrf_beam'], 2)} |")

    labels = {"transformer": "Transformer, 3+3 layers",
              "transformer_guided": "same Transformer with guided alignment (weight 0.1, "
                                    "layer 1 head 0)",
              "rnn_attention": "LSTM + Bahdanau + GRU"}
    epochs_of = {labels[name]: epochs(name)["count"] for name in MODELS}
    text = (DOCS / "results.md").read_text(encoding="utf-8")
    for name in ("transformer", "transformer_guided", "rnn_attention"):
        expected = row(labels[name], RESULTS[name])
        assert expected in text, expected
    assert_states("results.md",
                  f"BLEU **{fmt(t['test_bleu_beam'], 2)}** beam 4, {fmt(t['test_bleu_greedy'], 2)} "
                  f"greedy; chrF {fmt(t['test_chrf_beam'], 2)} / {fmt(t['test_chrf_greedy'], 2)} "
                  "(test)",
                  f"missed by {fmt(33 - t['test_bleu_beam'], 2)} BLEU",
                  f"BLEU **{fmt(r['test_bleu_beam'], 2)}** beam 4, {fmt(r['test_bleu_greedy'], 2)} "
                  f"greedy; chrF {fmt(r['test_chrf_beam'], 2)} / {fmt(r['test_chrf_greedy'], 2)} "
                  "(test)",
                  f"measured: {fmt(t['test_bleu_beam'] - r['test_bleu_beam'], 2)} BLEU below",
                  f"BLEU **{fmt(g['test_bleu_beam'], 2)}** beam 4, {fmt(g['test_bleu_greedy'], 2)} "
                  f"greedy; chrF {fmt(g['test_chrf_beam'], 2)} / {fmt(g['test_chrf_greedy'], 2)} "
                  "(test)",
                  f"met: {fmt(t['test_bleu_beam'] - g['test_bleu_beam'], 2)} below",
                  f"(epoch 9, {fmt(t['dev_bleu_greedy_best_epoch'], 2)})",
                  f"length penalty 1.0 scored {fmt(t['dev_bleu_beam_by_length_penalty']['1.0'], 2)}"
                  f" on dev against {fmt(t['dev_bleu_beam_by_length_penalty']['0.0'], 2)} with 0",
                  f"the mean of epochs 4–8 ({fmt(g['dev_bleu_greedy_averaged'], 2)} greedy) beat "
                  f"epoch 8 ({fmt(g['dev_bleu_greedy_best_epoch'], 2)})",
                  f"scored {fmt(g['dev_bleu_beam_by_length_penalty']['1.0'], 2)} on dev against "
                  f"{fmt(g['dev_bleu_beam_by_length_penalty']['0.0'], 2)} with 0",
                  f"and {fmt(t['test_bleu_greedy'] - g['test_bleu_greedy'], 2)} below it greedy",
                  f"scored {fmt(r['dev_bleu_greedy_averaged'], 2)} dev BLEU against its last "
                  f"epoch's {fmt(r['dev_bleu_greedy_best_epoch'], 2)}",
                  f"its dev beam scored {fmt(r['dev_bleu_beam_by_length_penalty']['0.0'], 2)} with"
                  f" no length penalty against {fmt(r['dev_bleu_beam_by_length_penalty']['1.0'], 2)}",
                  f"**{t['test_decode_timings']['greedy_seconds']} s greedy and "
                  f"{t['test_decode_timings']['beam_seconds']} s with 4 beams**",
                  f"({g['test_decode_timings']['greedy_seconds']} s and "
                  f"{g['test_decode_timings']['beam_seconds']} s for the guided one",
                  f"**{r['test_decode_timings']['greedy_seconds']} s and "
                  f"{r['test_decode_timings']['beam_seconds']} s** for the RNN")


def test_bleu_by_source_length():
    t, r = RESULTS["transformer"], RESULTS["rnn_attention"]
    rows = table_rows("results.md", "| source words | verses | Transformer greedy | "
                      "Transformer beam 4 | RNN greedy | RNN beam 4 |")
    expected = []
    for columns in zip(t["test_bleu_by_length_greedy"], t["test_bleu_by_length_beam"],
                       r["test_bleu_by_length_greedy"], r["test_bleu_by_length_beam"], strict=True):
        bucket = columns[0]["bucket"].replace("-", "–").replace("60+", "60 and more")
        expected.append([bucket, str(columns[0]["count"])]
                        + [fmt(column["score"], 2) for column in columns])
    assert rows == expected


# --- alignments ----------------------------------------------------------------------------

def test_tutorial_alignment_table_is_the_committed_one():
    rows = table_rows("tutorial_bible.md",
                      "| aligner | F1 | hit rate | NT F1 | NT hit rate | 1-to-1 hit rate |")
    expected = [[aligner, *cells(aligner, "F1", "hit rate", "NT F1", "NT hit rate",
                                 "1-to-1 hit rate")]
                for aligner in TABLE if not aligner.startswith("transformer_guided")]
    assert rows == expected


GUIDED_PAGE_ROWS = {
    "eflomal grow-diag-final-and (the reference links' aligner)": EFLOMAL,
    "guided Transformer, its guided head (layer 1, head 0; the default)": GUIDED_HEAD,
    "guided Transformer, all layers and heads averaged":
        "transformer_guided (all layers and heads averaged)",
    "unguided Transformer, all layers and heads averaged (its default)": UNGUIDED_MEAN,
    "unguided Transformer, its best head (layer 1, head 2)": "transformer layer 1 head 2",
    "unguided Transformer, layer 1 head 0 (the head that was guided in the other model)":
        "transformer layer 1 head 0",
    "RNN, Bahdanau attention": "rnn_attention",
    "diagonal": "diagonal",
}
RESULTS_PAGE_ROWS = {
    "eflomal grow-diag-final-and": EFLOMAL,
    "Transformer with guided alignment, its guided head (layer 1 head 0; its default)":
        GUIDED_HEAD,
    "Transformer with guided alignment, all layers and heads averaged":
        "transformer_guided (all layers and heads averaged)",
    "Transformer, all layers and heads averaged (kerasseq's default)": UNGUIDED_MEAN,
    "Transformer, middle (penultimate) layer, heads averaged": "transformer layer 1 (heads averaged)",
    "Transformer, last layer, heads averaged": "transformer (last layer, heads averaged)",
    "Transformer, best single head (layer 1 head 2)": "transformer layer 1 head 2",
    "Transformer, first head of the last layer": "transformer layer 2 head 0",
    "RNN, Bahdanau attention": "rnn_attention",
    "diagonal": "diagonal",
}


def test_guided_and_results_alignment_tables_are_the_committed_one():
    rows = table_rows("guided_alignment.md", "| aligner | F1 | hit rate | NT F1 | 1-to-1 hit rate |")
    expected = []
    for label, aligner in GUIDED_PAGE_ROWS.items():
        values = cells(aligner, "F1", "hit rate", "NT F1", "1-to-1 hit rate")
        if aligner in (EFLOMAL, GUIDED_HEAD):
            values[0] = f"**{values[0]}**"
        expected.append([label, *values])
    assert rows == expected
    rows = table_rows("results.md", "| aligner | precision | recall | F1 | AER | hit rate | "
                      "1-to-1 hit rate |")
    assert rows == [[label, *cells(aligner, "precision", "recall", "F1", "AER", "hit rate",
                                   "1-to-1 hit rate")]
                    for label, aligner in RESULTS_PAGE_ROWS.items()]
    # the rows picked are what their labels say
    unguided_heads = [a for a in TABLE if re.fullmatch(r"transformer layer \d head \d", a)]
    assert max(unguided_heads, key=f1) == "transformer layer 1 head 2"
    assert sorted(unguided_heads, key=f1)[-2] == "transformer layer 1 head 0"
    for aligner in TABLE:  # AER is 1 - F1 (every Strong's link is a sure link), as the pages say
        assert ALIGNMENTS["scores"][aligner]["aer"] == pytest.approx(1 - f1(aligner))


def test_alignment_prose():
    eflomal, mean = TABLE[EFLOMAL], TABLE[UNGUIDED_MEAN]
    heads = [a for a in TABLE if re.fullmatch(r"transformer layer \d head \d", a)]
    # the tutorial's attention readings: the unguided Transformer's and the RNN's
    attention = [a for a in TABLE if a.startswith("transformer ") or a == "rnn_attention"]
    below_diagonal = [a for a in attention if f1(a) < f1("diagonal")]
    assert below_diagonal == ["transformer layer 0 head 3"]
    assert all(ALIGNMENTS["scores"][a]["new_testament"]["f1"] > f1(a) for a in TABLE)
    gap = f1(EFLOMAL) - f1(UNGUIDED_MEAN)
    rnn_gap = f1(EFLOMAL) - f1("rnn_attention")
    assert ALIGNMENTS["best"]["transformer"]["f1_below_eflomal"] == pytest.approx(gap)
    t, r = RESULTS["transformer"], RESULTS["rnn_attention"]
    assert_states("tutorial_bible.md",
                  f"(F1 {mean[2]}, hit rate {mean[4]}), ahead of the middle layer's mean "
                  f"({TABLE['transformer layer 1 (heads averaged)'][2]};",
                  f"the last layer's mean ({TABLE['transformer (last layer, heads averaged)'][2]},",
                  f"first head of the last layer: {TABLE['transformer layer 2 head 0'][2]} here",
                  f"every single head ({fmt(min(map(f1, heads)), 3)}–{fmt(max(map(f1, heads)), 3)})",
                  f"F1 {eflomal[2]}, one-to-one hit rate {eflomal[8]} against attention's {mean[8]}",
                  f"grow-diag-final-and is {fmt(gap, 3)} F1",
                  f"(F1 {TABLE['rnn_attention'][2]}, one-to-one hit rate {TABLE['rnn_attention'][8]}"
                  f" against {mean[2]} and {mean[8]})",
                  f"({fmt(r['test_bleu_beam'], 2)} test BLEU against {fmt(t['test_bleu_beam'], 2)})",
                  f"beats the diagonal (F1 {TABLE['diagonal'][2]}): layer 0 head 3 "
                  f"({TABLE['transformer layer 0 head 3'][2]})",
                  f"barely above it ({TABLE['transformer layer 0 head 0'][2]})",
                  f"(AER {eflomal[3]};",
                  f"precision of 0.412 instead of {eflomal[0]}",
                  f"{ALIGNMENTS['verses']:,} test verses, {ALIGNMENTS['strong_links']:,} Strong's")
    guided = TABLE[GUIDED_HEAD]
    assert_states("guided_alignment.md",
                  f"reached an F1 of {mean[2]} against Strong's links, where the statistical "
                  f"aligner eflomal reached {eflomal[2]}",
                  f"(F1 ≥ {eflomal[2]}): **it is missed by {fmt(f1(EFLOMAL) - f1(GUIDED_HEAD), 3)}"
                  " F1.**",
                  f"went from {TABLE['transformer layer 1 head 0'][2]} F1 in the unguided model",
                  f"layer 1 head 2, has {TABLE['transformer layer 1 head 2'][2]}) to {guided[2]}",
                  f"is {fmt(f1(GUIDED_HEAD) - f1(UNGUIDED_MEAN), 3)} F1",
                  f"({guided[5]} F1 against {mean[5]} for either model), still below eflomal's "
                  f"{eflomal[5]}",
                  f"its best head scores {TABLE['transformer layer 1 head 2'][2]} F1 against the "
                  f"guided head's {guided[2]}",
                  f"{ALIGNMENTS['verses']:,} test verses against their "
                  f"{ALIGNMENTS['strong_links']:,} Strong's")
    assert TABLE["transformer_guided (all layers and heads averaged)"][5] == mean[5]
    timings = ALIGNMENTS["timings"]
    assert_states("results.md",
                  f"best attention reading is {fmt(gap, 3)} F1 below eflomal; the RNN's Bahdanau "
                  f"attention is {fmt(rnn_gap, 3)} below it",
                  f"measured: {fmt(gap, 3)} and {fmt(rnn_gap, 3)} F1 below eflomal",
                  f"F1 {mean[2]} (Transformer) and {TABLE['rnn_attention'][2]} (RNN)",
                  f"eflomal {eflomal[2]}, diagonal {TABLE['diagonal'][2]}",
                  f"F1 **{guided[2]}** against Strong's-number links",
                  f"missed by {fmt(f1(EFLOMAL) - f1(GUIDED_HEAD), 3)} F1",
                  f"stays {fmt(f1(EFLOMAL) - f1(GUIDED_HEAD), 3)} F1 below eflomal",
                  f"eflomal took {timings['eflomal_seconds']} s",
                  f"attention {timings['transformer_seconds']} s (Transformer), "
                  f"{timings['rnn_attention_seconds']} s (RNN) and "
                  f"{timings['transformer_guided_seconds']} s (guided Transformer)")


# --- translations and figures --------------------------------------------------------------

def read_tsv(name):
    header, *lines = (ARTEFACTS / name / "test_translations.tsv").read_text(
        encoding="utf-8").splitlines()
    columns = header.split("\t")
    return [dict(zip(columns, line.split("\t"), strict=True)) for line in lines]


VERSE_HEADING = re.compile(r"^\*\*(.+?)\*\* \((best|median|worst)(?: by .*)?\)$")


def verse_blocks(path):
    """`[(verse, group, {row label: text}), ...]` of the verse tables of a page."""
    blocks, in_table = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        heading = VERSE_HEADING.match(line)
        if heading:
            blocks.append((heading[1], heading[2], {}))
            in_table = True
        elif in_table and line.startswith("|"):
            if not line.startswith(("| |", "|---")):
                label, text = (cell.strip() for cell in line.strip().strip("|").split("|", 1))
                blocks[-1][2][label] = text
        elif in_table and blocks[-1][2]:  # the line after the verse's table
            in_table = False
    return blocks


def test_test_verses_are_those_of_the_translation_files():
    tables = {name: {row["verse"]: row for row in read_tsv(name)} for name in MODELS}
    shown = verse_blocks(DOCS / "tutorial_bible.md")
    assert [(verse, group) for verse, group, _ in shown] == [
        (verse, group) for verse, group, _ in verse_blocks(ARTEFACTS / "translations.md")]
    assert [group for _, group, _ in shown] == ["best"] * 3 + ["median"] * 3 + ["worst"] * 3
    chrf = sorted(float(row["beam_chrf"]) for row in tables["transformer"].values())
    middle = len(chrf) // 2
    for verse, group, rows in shown:
        first = tables["transformer"][verse]
        value = float(first["beam_chrf"])
        if group == "best":
            assert value >= chrf[-3]
        elif group == "worst":
            assert value <= chrf[2]
        else:
            assert chrf[middle - 2] <= value <= chrf[middle + 2]
        expected = {"Spanish": first["source"], "reference": first["reference"]}
        for name in ("transformer", "rnn_attention"):
            row = tables[name][verse]
            expected[f"{name}, greedy"] = row["greedy"]
            expected[f"{name}, beam (chrF {row['beam_chrf']})"] = row["beam"]
        assert rows == expected, verse


def test_translations_page_has_a_title_and_a_link():
    assert (ARTEFACTS / "translations.md").read_text(encoding="utf-8").startswith("# ")
    assert "(artefacts/bible_es_en/translations.md)" in page("tutorial_bible.md")


@pytest.mark.parametrize("name, image", [("tutorial_bible.md", "bible_attention_heads.png"),
                                         ("guided_alignment.md", "bible_attention_heads.png"),
                                         ("guided_alignment.md", "bible_attention_heads_guided.png")])
def test_head_grids_link_to_their_full_size_image(name, image):
    header = (DOCS / "images" / image).read_bytes()[:24]
    width, _ = struct.unpack(">II", header[16:24])  # the PNG's IHDR
    assert width == 1480
    text = page(name)
    linked = re.search(r"\[!\[[^\]]*\]\(images/" + re.escape(image) + r"\)\]\(images/"
                       + re.escape(image) + r"\)", text)
    assert linked, f"{name}: {image} is not a link to itself"
    assert "full size" in text[linked.end():linked.end() + 200].replace("full-size", "full size")
    if name == "tutorial_bible.md" or image.endswith("_guided.png"):
        assert f"{width:,}-pixel image" in text[linked.end():linked.end() + 200]


def test_the_tutorial_names_all_three_models():
    text = page("tutorial_bible.md")
    intro = text[:text.index("## The data")]
    assert "a Transformer, an RNN with attention, and the same Transformer trained with" in intro
    assert "Learning curves of the three models" in text
    assert set(RESULTS) == set(MODELS)
