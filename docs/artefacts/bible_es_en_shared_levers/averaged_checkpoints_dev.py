"""Run as: PYTHONPATH=/work/main .venv/bin/python averaged_checkpoints_dev.py DIR OUT.json
(at commit d653100).

Dev greedy BLEU of the average of the last k epoch checkpoints (k = 2..4; k = 1 and 5 are the evaluate phase's
model.keras and averaged.keras, in results.json) of the guided
one-vocabulary run: the number of averaged checkpoints as a lever (issue 53 item 1), dev only."""
import json, sys, time
sys.path.insert(0, "/work/main/examples")
import spanish_to_english_bible as ex
from kerasseq.data.sword import load_bible_pairs
from kerasseq.evaluation import corpus_bleu
from kerasseq.training.averaging import average_checkpoints

directory = sys.argv[1]  # .../guided5186/runs/bible_shared_guided/transformer_guided
args = ex.make_parser().parse_args(["--shared-vocabulary-size", "8000"])
search = ex.search_settings(args)
dev = [p for p in load_bible_pairs() if p.split == "dev"]
checkpoints = ex.epoch_checkpoints(directory + "/checkpoints")
print([c.rsplit("/", 1)[1] for c in checkpoints], flush=True)
out = {}
for k in range(2, len(checkpoints)):
    t = time.time()
    model = average_checkpoints(checkpoints[-k:])
    texts = model.translate([p.source for p in dev], batch_size=64, method="greedy", **search)
    out[k] = corpus_bleu(texts, [p.target for p in dev])
    print(k, round(out[k], 2), round(time.time() - t), flush=True)
json.dump(out, open(sys.argv[2], "w"), indent=1)
