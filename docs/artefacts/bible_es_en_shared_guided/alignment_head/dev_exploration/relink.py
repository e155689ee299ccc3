import os, sys, pickle, numpy as np
sys.path.insert(0, "/work/main/examples")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras, kerasseq  # noqa
from kerasseq.alignment import reference_alignments
from kerasseq.data.sword import load_bible_pairs
RUN = os.path.expanduser("~/kerasseq-runs/guided5186/runs/bible_shared_guided")
model = keras.models.load_model(f"{RUN}/transformer_guided/averaged.keras")
st, tt = model.source_tokenizer, model.target_tokenizer
train = [p for p in load_bible_pairs() if p.split == "train"]
D = pickle.load(open("/tmp/item2/states_keys.pkl", "rb"))
src = st.encode([p.source for p in train[:12000]]).to_list(); tgt = tt.encode([p.target for p in train[:12000]]).to_list()
for sym in sys.argv[1:]:
    links = reference_alignments([p.source for p in train], [p.target for p in train], st, tt,
                                 cache_path=f"/tmp/item2/links_{sym}.npz", symmetrization=sym)
    out = []
    for sid, tid, enc, qs, lk, idx in D["train"]:
        lk = np.zeros_like(lk)
        for r, i in enumerate(idx):
            l = np.asarray(links[i]).reshape(-1, 2)
            l = l[(l[:, 0] < len(tgt[i])) & (l[:, 1] < len(src[i]))]
            lk[r, l[:, 0], l[:, 1]] = 1
        out.append((sid, tid, enc, qs, lk, idx))
    pickle.dump({"dev": D["dev"], "train": out}, open(f"/tmp/item2/states_keys_{sym}.pkl", "wb"), protocol=4)
    print(sym, "done", flush=True)
