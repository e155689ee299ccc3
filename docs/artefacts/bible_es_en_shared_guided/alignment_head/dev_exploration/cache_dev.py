# Dev only: cache the guided model's word-attention matrices (every layer/head) and Strong's links.
import os, sys, pickle, numpy as np
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, "/work/main/examples")
import keras
import kerasseq  # noqa
from kerasseq.alignment import align_texts
from kerasseq.data.sword import load_bible_pairs
from bible_alignments import same_words
split = sys.argv[1] if len(sys.argv) > 1 else "dev"
assert split == "dev"
model = keras.models.load_model(os.path.expanduser(
    "~/kerasseq-runs/guided5186/runs/bible_shared_guided/transformer_guided/averaged.keras"))
all_pairs = load_bible_pairs()
pairs = [p for p in all_pairs if p.split == split]
scored = [p for p in same_words(model, pairs) if len(p.source_words) <= 200]
print(len(pairs), len(scored), model.guided_head, flush=True)
res = align_texts(model, [p.source for p in scored], [p.target for p in scored], heads=True, batch_size=32)
heads = [r["head_weights"].astype(np.float32) for r in res]
with open(f"/tmp/item2/{split}.pkl", "wb") as f:
    pickle.dump({"heads": heads, "links": [p.links for p in scored], "guided": model.guided_head,
                 "src": [p.source_words for p in scored], "tgt": [p.target_words for p in scored],
                 "testament": [p.testament for p in scored]}, f)
print("done")
