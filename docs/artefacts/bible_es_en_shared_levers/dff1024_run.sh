#!/bin/bash
# Issue 53 item 1, a dev-only recipe run: dff 1024 at the steps its step cost
# leaves in the 33.72 run's minutes (5,394 / 1.13 = 4,766; bible_recipe_sweep.py).
# Train phase only: greedy dev BLEU after each epoch; the test split is not read.
# Resumable across sessions: rerun with --resume appended.
cd ~/kerasseq-runs/dff1024
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD
/work/main/.venv/bin/python examples/spanish_to_english_bible.py --phase train --models transformer \
  --shared-vocabulary-size 8000 --dff 1024 --max-steps 4766 --output-dir runs/bible_shared_dff1024 "$@"
