#!/bin/bash
# Issue 53 item 2, a dev-only run: the guided head's loss weight 0.5 (layer 1
# head 0 as before) at the guided step budget (5,394 / 1.04 = 5,186 steps).
# Train phase only; dev alignments with bible_alignments.py --split dev on
# model.keras; the test split is not read. Resumable: rerun with --resume.
cd ~/kerasseq-runs/guided05
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD
/work/main/.venv/bin/python examples/spanish_to_english_bible.py --phase train --models transformer_guided \
  --shared-vocabulary-size 8000 --guided-alignment-weight 0.5 --max-steps 5186 \
  --output-dir runs/bible_shared_guided05 "$@"
