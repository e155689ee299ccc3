#!/bin/bash
# The guided step-parity run (issue 53 item 2), from a clone at 5223e9e outside the work tree.
cd ~/kerasseq-runs/guided5186
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD
PY=/work/main/.venv/bin/python
$PY examples/spanish_to_english_bible.py --phase train --models transformer_guided --shared-vocabulary-size 8000 --max-steps 5186 --output-dir runs/bible_shared_guided --verbose 2
# evaluation exactly as the unguided 33.72 run's (dev choices, then test once)
$PY examples/spanish_to_english_bible.py --phase evaluate --models transformer_guided --shared-vocabulary-size 8000 --output-dir runs/bible_shared_guided --length-penalties 0 1 --no-repeat-ngram-sizes 0 3 4 6
# alignment readings: chosen on dev, then test
$PY examples/bible_alignments.py --model transformer_guided=runs/bible_shared_guided/transformer_guided --split dev --output-dir runs/align_dev
$PY examples/bible_alignments.py --model transformer_guided=runs/bible_shared_guided/transformer_guided --split test --output-dir runs/align_test --figures-dir runs/align_test/figures
