#!/bin/bash
# Issue 53 item 1, a dev-only recipe run: the learning-rate scale 2 (the schedule's
# peak doubled, warm-up 1,000 steps as before) at the 33.72 run's 5,394 steps (its
# steps cost the same). Train phase only: greedy dev BLEU after each epoch; the
# test split is not read. Resumable across sessions: rerun with --resume appended.
cd ~/kerasseq-runs/lrscale2
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD
/work/main/.venv/bin/python examples/spanish_to_english_bible.py --phase train --models transformer \
  --shared-vocabulary-size 8000 --lr-scale 2 --max-steps 5394 --output-dir runs/bible_shared_lrscale2 "$@"
