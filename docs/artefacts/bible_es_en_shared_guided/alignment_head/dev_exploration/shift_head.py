# Dev only (issue 53 item 2 exploration): a separate alignment head on the FROZEN guided
# model, trained on eflomal's links of the training verses, its query at position t+shift
# (shift 1: the position whose input is target piece t itself, Chen et al. 2020 Shift-AET).
# Scored on dev verses against Strong's links. Test is never read.
import os, sys, time, pickle, numpy as np
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, "/work/main/examples")
import tensorflow as tf, keras
import kerasseq  # noqa
from kerasseq.alignment import reference_alignments, alignment_scores, links_from_weights
from kerasseq.alignment.merge import merge_pieces_batch, continuation_table
from kerasseq.data.sword import load_bible_pairs
from kerasseq.data.tokenizer import START_ID
from bible_alignments import same_words

RUN = os.path.expanduser("~/kerasseq-runs/guided5186/runs/bible_shared_guided")
model = keras.models.load_model(f"{RUN}/transformer_guided/averaged.keras")
st, tt = model.source_tokenizer, model.target_tokenizer
pairs = load_bible_pairs()
train = [p for p in pairs if p.split == "train"]
dev = [p for p in same_words(model, [p for p in pairs if p.split == "dev"])]
t0 = time.time()
links = reference_alignments([p.source for p in train], [p.target for p in train], st, tt,
                             cache_path=f"{RUN}/reference_links.npz")
print("links", len(links), f"{time.time()-t0:.0f}s", flush=True)

def encode(ps):
    return st.encode([p.source for p in ps]).to_list(), tt.encode([p.target for p in ps]).to_list()

@tf.function(reduce_retracing=True)
def states(source_ids, target_in):
    smask = tf.not_equal(source_ids, 0); tmask = tf.not_equal(target_in, 0)
    enc = source_ids
    x = model.source_embedding(source_ids)
    for b in model.encoder_blocks:
        x = b(x, encoder_padding_mask=smask, training=False)
    enc = x
    y = model.target_embedding(target_in)
    qs = []
    for b in model.decoder_blocks:
        z1 = b.causal_self_attention(y, decoder_padding_mask=tmask, training=False)
        qs.append(z1)
        z2 = b.cross_attention(z1, enc, encoder_padding_mask=smask, training=False)
        y = b.feed_forward(z2, training=False)
    qs.append(y)
    return enc, tf.stack(qs, 0)  # (B,S,d), (L+1,B,T+1,d)

def pad(rows, n):
    out = np.zeros((len(rows), n), np.int32)
    for r, row in enumerate(rows):
        out[r, :len(row)] = row
    return out

def collect(ps, pair_links=None, bs=64, max_pieces=100):
    src, tgt = encode(ps)
    order = np.argsort([len(a) + len(b) for a, b in zip(src, tgt)])
    data = []
    for s in range(0, len(order), bs):
        idx = [i for i in order[s:s+bs] if pair_links is None or (len(src[i]) <= max_pieces and len(tgt[i]) + 1 <= max_pieces)]
        if not idx: continue
        S = max(len(src[i]) for i in idx); T = max(len(tgt[i]) for i in idx)
        sid = pad([src[i] for i in idx], S)
        tin = pad([[START_ID] + tgt[i] for i in idx], T + 1)
        tid = pad([tgt[i] for i in idx], T)
        enc, qs = states(tf.constant(sid), tf.constant(tin))
        lk = None
        if pair_links is not None:
            lk = np.zeros((len(idx), T, S), np.float32)
            for r, i in enumerate(idx):
                l = np.asarray(pair_links[i]).reshape(-1, 2)
                l = l[(l[:, 0] < len(tgt[i])) & (l[:, 1] < len(src[i]))]
                lk[r, l[:, 0], l[:, 1]] = 1
        data.append((sid, tid, enc.numpy().astype(np.float16), qs.numpy().astype(np.float16), lk, idx))
    return data

t0 = time.time()
dev_data = collect(dev)
print("dev states", f"{time.time()-t0:.0f}s", flush=True)
train_data = collect(train, links)
print("train states", len(train_data), f"{time.time()-t0:.0f}s", flush=True)
pickle.dump({"dev": dev_data, "train": train_data}, open("/tmp/item2/states.pkl", "wb"), protocol=4)
print("saved", flush=True)
