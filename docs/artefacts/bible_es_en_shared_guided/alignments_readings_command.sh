#!/bin/bash
# The guided one-vocabulary model's attention read both ways (issue 53 item 2), from the
# work tree at 5babad7 (links_from_weights(method=...)): dev first, where the reading was
# chosen, then test once. The model is the 5,186-step run's averaged.keras.
cd /work/main
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=/work/main
M=transformer_guided=$HOME/kerasseq-runs/guided5186/runs/bible_shared_guided/transformer_guided
.venv/bin/python examples/bible_alignments.py --model $M --split dev --output-dir $HOME/kerasseq-runs/guided5186/runs/align_dev_readings
.venv/bin/python examples/bible_alignments.py --model $M --split test --output-dir $HOME/kerasseq-runs/guided5186/runs/align_test_readings
