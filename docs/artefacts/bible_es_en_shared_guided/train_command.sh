#!/bin/bash
cd ~/kerasseq-runs/guided5186
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD
exec /work/main/.venv/bin/python examples/spanish_to_english_bible.py --phase train --models transformer_guided --shared-vocabulary-size 8000 --max-steps 5186 --output-dir runs/bible_shared_guided --verbose 2
