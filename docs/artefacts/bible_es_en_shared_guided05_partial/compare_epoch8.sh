#!/bin/bash
# dev alignments of guided05 (weight 0.5) at its newest epoch checkpoint and of guided5186 (weight 0.1) at epoch 8
set -x
T=$(pgrep -f "bible_shared_guided05" | head -1)
kill -STOP $T; echo "SIGSTOP $(date -u +%H:%M:%S) (dev alignments of epoch checkpoints)" >> ~/kerasseq-runs/guided05/runs/pauses.txt
cd ~/kerasseq-runs/guided05
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$PWD
NEWEST=$(ls runs/bible_shared_guided05/transformer_guided/checkpoints/epoch_*.keras | tail -1)
echo "$NEWEST"
/work/main/.venv/bin/python examples/bible_alignments.py --model w05=$NEWEST \
  --model w01_epoch8=$HOME/kerasseq-runs/guided5186/runs/bible_shared_guided/transformer_guided/checkpoints/epoch_008.keras \
  --split dev --no-eflomal --output-dir runs/align_dev_epochs > runs/align_dev_epochs.log 2>&1
kill -CONT $T; echo "SIGCONT $(date -u +%H:%M:%S)" >> ~/kerasseq-runs/guided05/runs/pauses.txt
grep -E "guided head|diagonal" runs/align_dev_epochs/alignments.md
