"""The int8 quality table of docs/export.md, re-scored from the outputs in
docs/artefacts/g2p_ctranslate2/ against CMUdict's test split (no TensorFlow
model runs: the three engines' outputs are the artefact)."""

import json

from kerasseq.data import load_cmudict
from kerasseq.evaluation import g2p_error_rates
from tests.test_docs import DOCS

RUN = DOCS / "artefacts" / "g2p_ctranslate2"
ENGINES = ("ctranslate2 float32", "ctranslate2 int8", "kerasseq Translator")


def flat(path):
    return " ".join((DOCS / path).read_text(encoding="utf-8").split())


def outputs():
    header, *lines = (RUN / "test_outputs.tsv").read_text(encoding="utf-8").splitlines()
    assert header.split("\t") == ["source", *ENGINES]
    rows = [line.split("\t") for line in lines]
    return [row[0] for row in rows], {name: [row[1 + i] for row in rows]
                                      for i, name in enumerate(ENGINES)}


def test_int8_table_is_the_rescored_outputs():
    test = load_cmudict("test")
    words, texts = outputs()
    assert words == [word for word, _ in test]  # every test word, in order
    references = [pronunciations for _, pronunciations in test]
    record = json.loads((RUN / "ctranslate2_quality.json").read_text(encoding="utf-8"))
    page = flat("export.md")
    float32 = texts["ctranslate2 float32"]
    assert f"| CMUdict test split, {len(words):,} words, beam {record['num_beams']} |" in page
    rates = {name: g2p_error_rates(texts[name], references) for name in ENGINES}
    for name in ENGINES:
        same = sum(a == b for a, b in zip(texts[name], float32, strict=True)) / len(words)
        row = record["rows"][name]
        assert abs(row["wer"] - 100 * rates[name]["wer"]) < 1e-9
        assert abs(row["per"] - 100 * rates[name]["per"]) < 1e-9
        assert abs(row["same_as_ctranslate2_float32"] - same) < 1e-12
        label = "kerasseq `Translator`" if name.startswith("kerasseq") else name.replace(
            "ctranslate2", "CTranslate2")
        assert (f"| {label} | {100 * rates[name]['wer']:.2f} % | "
                f"{100 * rates[name]['per']:.2f} % | "
                f"{100 * same:.1f} % | {row['seconds']:.0f} |") in page
    cost, per_cost = (100 * (rates["ctranslate2 int8"][key] - rates["ctranslate2 float32"][key])
                      for key in ("wer", "per"))
    assert f"int8 costs **{cost:.2f} points of WER** (and {per_cost:.2f} of PER)" in page


def test_int8_changes_are_counted_from_the_outputs():
    test = load_cmudict("test")
    _, texts = outputs()
    moves = {}
    for (_, references), old, new in zip(test, texts["ctranslate2 float32"],
                                         texts["ctranslate2 int8"], strict=True):
        if old != new:
            key = (old in references, new in references)
            moves[key] = moves.get(key, 0) + 1
    changed = sum(moves.values())
    page = flat("export.md")
    assert (f"It changes the output of {changed} words ({100 * changed / len(test):.1f} %): "
            f"{moves[True, False]} right answers become wrong and {moves[False, True]} wrong "
            f"ones right; the other {moves[False, False] + moves[True, True]} move from one "
            f"wrong pronunciation to another ({moves[False, False]}) or between two right "
            f"ones ({moves[True, True]}).") in page
    differ = sum(a != b for a, b in zip(texts["ctranslate2 float32"],
                                        texts["kerasseq Translator"], strict=True))
    assert (f"CTranslate2 float32 gives kerasseq's translation for "
            f"{100 * (1 - differ / len(test)):.1f} % of the words; the other "
            f"{differ} differ") in page


def test_training_figures_are_the_run_s():
    run = json.loads((RUN / "train_results.json").read_text(encoding="utf-8"))
    page = flat("export.md")
    arguments = run["arguments"]
    assert (arguments["num_layers"], arguments["d_model"], arguments["time_limit_minutes"],
            arguments["threads"]) == (2, 128, 25.0, 1)
    assert (f"Transformer (d_model 128, {run['parameters']:,} parameters) of "
            f"`examples/g2p_cmudict.py`, trained for 25 minutes on one thread "
            f"({run['epochs_run']} epochs; dev WER {100 * run['dev']['beam4']['wer']:.2f} % "
            f"with beam 4)") in page
    history = (RUN / "history.csv").read_text(encoding="utf-8").splitlines()
    assert len(history) == 1 + run["epochs_run"]


def test_dev_speed_table_is_the_benchmark_s_output():
    # benchmarks/ctranslate2_speed.py --skip-synthetic --model ... (its printed table)
    log = (RUN / "speed_dev.txt").read_text(encoding="utf-8")
    page = flat("export.md")
    rows = [line for line in log.splitlines() if line.startswith("| ")
            and not line.startswith("| engine") and "%" not in line]
    assert len(rows) == 6
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        name = (cells[0].replace("1t", "1 thread").replace("2t", "2 threads")
                .replace("(jit auto)", "(jit auto)"))
        assert f"| {name} | {' | '.join(cells[1:])} |" in page, row
    assert "2000 dev words" in log and "| 2,000 dev words |" in page


def test_quiet_synthetic_ratios_are_the_benchmark_s_output():
    # benchmarks/ctranslate2_speed.py --skip-dev on the quiet machine
    log = (RUN / "speed_synthetic_quiet.txt").read_text(encoding="utf-8")
    summary = log[log.index("### Translator / CTranslate2 float32 (2 threads)"):]
    rows = [line for line in summary.splitlines() if line.startswith("| ")
            and not line.startswith("| search")]
    assert len(rows) == 4
    page = flat("export.md")
    for row in rows:
        assert row in page, row
    assert "wall time 106 s" in log and "(106 s;" in page
