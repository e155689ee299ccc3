"""The levers' curves: greedy dev BLEU after each epoch against optimizer steps, for
the 33.72 run (the one-vocabulary Transformer of docs/artefacts/bible_es_en_shared/)
and each lever's run (the *_history.csv files beside this script). Steps, not
minutes: most runs were paused and shared the CPU, so their minutes are not
comparable; a lever's step cost is stated on the page.

Run as (from the repository root):
    .venv/bin/python docs/artefacts/bible_es_en_shared_levers/levers_curves.py docs/images/bible_levers_dev_bleu.png
"""

import csv
import json
import sys
from pathlib import Path

from matplotlib.figure import Figure

HERE = Path(__file__).resolve().parent
BASE = HERE.parent / "bible_es_en_shared" / "results.json"
# history file stem -> label, in the order of the page's bullets
LEVERS = {
    "vocab4000": "4,000 pieces",
    "dff1024": "feed-forward 1,024",
    "lrscale2": "learning-rate scale 2",
    "dropout0": "no dropout",
}


def cumulative(batches):
    steps, total = [], 0
    for count in batches:
        total += int(float(count))
        steps.append(total)
    return steps


def curves():
    """`{label: (steps after each epoch, greedy dev BLEU after each epoch)}`, the
    33.72 run first."""
    history = json.loads(BASE.read_text(encoding="utf-8"))["models"]["transformer"]["history"]
    result = {"33.72 run (8,000 pieces)": (cumulative(history["batches"]),
                                           [float(b) for b in history["dev_bleu"]])}
    for stem, label in LEVERS.items():
        with open(HERE / f"{stem}_history.csv", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        result[label] = (cumulative(row["batches"] for row in rows),
                         [float(row["dev_bleu"]) for row in rows])
    return result


def plot(path=None):
    figure = Figure(figsize=(7.0, 3.6), layout="constrained")
    ax = figure.add_subplot(1, 1, 1)
    for index, (label, (steps, bleu)) in enumerate(curves().items()):
        ax.plot(steps, bleu, marker="o", markersize=3, color=f"C{index}", label=label,
                linewidth=2.2 if index == 0 else 1.2)
    ax.set(xlabel="optimizer steps (batches of 64 verses)", ylabel="BLEU",
           title="greedy dev BLEU after each epoch")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    if path is not None:
        figure.savefig(path, dpi=110)
    return figure


if __name__ == "__main__":
    plot(sys.argv[1])
