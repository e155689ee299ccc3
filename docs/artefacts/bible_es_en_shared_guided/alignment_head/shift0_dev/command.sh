#!/bin/bash
# Issue 53 item 2, dev only: the shipped head (bible_alignment_head.py, run from the work tree
# committed next as c86cb5f) at layer 0 with shift 0, to compare with the
# chosen shift 1 on the same layer (the exploration's shift-0 figure read this pre-norm
# model's features without their LayerNorms). No eflomal (its rows are in ../alignments_dev.json).
cd /work/main
export PYTHONDONTWRITEBYTECODE=1
G=$HOME/kerasseq-runs/guided5186/runs/bible_shared_guided
H=$HOME/kerasseq-runs/ahead_shift0
.venv/bin/python examples/bible_alignment_head.py --model $G/transformer_guided \
  --links-cache $G/reference_links.npz --layer 0 --shift 0 --output-dir $H
.venv/bin/python examples/bible_alignments.py --split dev --no-eflomal \
  --model transformer_guided=$G/transformer_guided \
  --alignment-head transformer_guided=$H/alignment_head.keras --output-dir $H/dev
