#!/bin/bash
# Issue 53 item 1, a dev-only recipe run: a shared vocabulary of 4,000 WordPiece
# ids instead of 8,000 (Sennrich & Zhang 2019: smaller subword vocabularies for
# small corpora), everything else the 33.72 run's recipe, at its 5,394 steps
# (the step cost is measured before a full run is considered). Train phase only:
# greedy dev BLEU after each epoch; the test split is not read. Resumable across
# sessions: rerun with --resume appended.
cd ~/kerasseq-runs/vocab4000
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD
/work/main/.venv/bin/python examples/spanish_to_english_bible.py --phase train --models transformer \
  --shared-vocabulary-size 4000 --max-steps 5394 --output-dir runs/bible_shared_vocab4000 "$@"
