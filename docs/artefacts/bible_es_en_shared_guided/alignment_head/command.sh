#!/bin/bash
# Issue 53 item 2: a ShiftedAlignmentHead (layer 0, shift 1, key_dim 64, 3 epochs) trained on
# the frozen guided one-vocabulary model (the 5,186-step run's averaged.keras) against eflomal's
# links of the training verses (the guided run's cached reference_links.npz), then scored on dev,
# where the reading (grow-diag-final-and) was chosen, and on test once. Work tree at bff56b4 with
# the examples of 72b58fa (the same code). The layer, the shift and the reading were chosen on
# dev beforehand with the scripts of dev_exploration/ (run from /tmp/item2 and with the paths
# of this machine; dev_exploration.txt says what they compared).
cd /work/main
export PYTHONDONTWRITEBYTECODE=1
G=$HOME/kerasseq-runs/guided5186/runs/bible_shared_guided
H=$HOME/kerasseq-runs/ahead
.venv/bin/python examples/bible_alignment_head.py --model $G/transformer_guided \
  --links-cache $G/reference_links.npz --output-dir $H
for SPLIT in dev test; do
  .venv/bin/python examples/bible_alignments.py --split $SPLIT \
    --model transformer_guided=$G/transformer_guided \
    --alignment-head transformer_guided=$H/alignment_head.keras --output-dir $H/$SPLIT
done
