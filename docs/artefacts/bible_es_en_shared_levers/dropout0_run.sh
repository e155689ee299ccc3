#!/bin/bash
# Issue 53 item 1, a dev-only recipe run: no dropout in the Transformer
# (--transformer-dropout 0; label smoothing 0.1 kept) at the 33.72 run's 5,394
# steps (its steps cost what the base steps cost: bible_recipe_sweep.py's
# SAME_COST_AS_BASE). Train phase only: greedy dev BLEU after each epoch; the
# test split is not read. Resumable across sessions: rerun with --resume appended.
cd ~/kerasseq-runs/dropout0
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD
/work/main/.venv/bin/python examples/spanish_to_english_bible.py --phase train --models transformer \
  --shared-vocabulary-size 8000 --transformer-dropout 0 --max-steps 5394 --output-dir runs/bible_shared_dropout0 "$@"
