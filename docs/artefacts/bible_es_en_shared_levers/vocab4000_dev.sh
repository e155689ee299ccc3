#!/bin/bash
# Issue 53 item 1: the evaluate phase's dev choices of the finished 4,000-piece run
# (the averaged checkpoints or the best epoch, the length penalty, the no-repeat
# guard), made on dev only; the test split is not translated.
cd ~/kerasseq-runs/vocab4000
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD
/work/main/.venv/bin/python examples/spanish_to_english_bible.py --phase dev --models transformer \
  --shared-vocabulary-size 4000 --length-penalties 0 1 --no-repeat-ngram-sizes 0 3 4 6 \
  --output-dir runs/bible_shared_vocab4000 "$@"
