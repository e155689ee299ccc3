# Dev only: train the alignment head on the cached states; score dev readings vs Strong's.
import os, sys, time, pickle, numpy as np
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, "/work/main/examples")
import tensorflow as tf, keras
import kerasseq  # noqa
from kerasseq.alignment import alignment_scores, links_from_weights
from kerasseq.alignment.merge import merge_pieces_batch, continuation_table
from kerasseq.data.sword import load_bible_pairs
from bible_alignments import same_words

D = pickle.load(open("/tmp/item2/states.pkl", "rb"))
RUN = os.path.expanduser("~/kerasseq-runs/guided5186/runs/bible_shared_guided")
model = keras.models.load_model(f"{RUN}/transformer_guided/averaged.keras")
cs = tf.constant(continuation_table(model.source_tokenizer)); ct = tf.constant(continuation_table(model.target_tokenizer))
pairs = load_bible_pairs()
dev = same_words(model, [p for p in pairs if p.split == "dev"])
gold = [p.links for p in dev]

class Head(tf.Module):
    def __init__(self, d=256, k=64, seed=0, mlp=False):
        g = tf.random.Generator.from_seed(seed)
        self.wq = tf.Variable(g.normal((d, k)) / np.sqrt(d)); self.wk = tf.Variable(g.normal((d, k)) / np.sqrt(d))
        self.bq = tf.Variable(tf.zeros(k)); self.k = k
    def __call__(self, q, enc, smask):
        s = tf.einsum("btk,bsk->bts", q @ self.wq + self.bq, enc @ self.wk) / np.sqrt(self.k)
        s = tf.where(smask[:, None, :], s, -1e9)
        return tf.nn.softmax(s, -1)

def query(qs, layers, shift, T):
    q = sum(tf.cast(qs[l], tf.float32) for l in layers) / len(layers)  # (B, T+1, d)
    return q[:, shift:shift + T]

def run(layers, shift, epochs=3, lr=2e-3, k=64):
    head = Head(k=k); opt = keras.optimizers.Adam(lr)
    @tf.function(reduce_retracing=True)
    def step(sid, qsl, enc, lk):
        with tf.GradientTape() as tape:
            a = head(qsl, enc, tf.not_equal(sid, 0))
            mass = tf.reduce_sum(lk, -1); linked = tf.cast(mass > 0, tf.float32)
            ref = lk / tf.maximum(mass, 1e-12)[..., None]
            row = -tf.reduce_sum(ref * tf.math.log(tf.maximum(a, 1e-9)), -1)
            loss = tf.reduce_sum(row * linked) / tf.maximum(tf.reduce_sum(linked), 1.0)
        g = tape.gradient(loss, head.trainable_variables)
        opt.apply_gradients(zip(g, head.trainable_variables))
        return loss
    rng = np.random.default_rng(0)
    for e in range(epochs):
        tot = []
        for i in rng.permutation(len(D["train"])):
            sid, tid, enc, qs, lk, idx = D["train"][i]
            T = tid.shape[1]
            tot.append(float(step(tf.constant(sid), query(qs, layers, shift, T), tf.cast(enc, tf.float32), tf.constant(lk))))
        print(f"  layers {layers} shift {shift} epoch {e+1} loss {np.mean(tot):.4f}", flush=True)
    # dev
    mats = [None] * len(dev)
    for sid, tid, enc, qs, _, idx in D["dev"]:
        T = tid.shape[1]
        a = head(query(qs, layers, shift, T), tf.cast(enc, tf.float32), tf.not_equal(sid, 0))
        w, ns, nt = merge_pieces_batch(a, sid, tid, cs, ct)
        w, ns, nt = w.numpy(), ns.numpy(), nt.numpy()
        for r, i in enumerate(idx):
            mats[i] = w[r, :nt[r], :ns[r]]
    for meth in ("target", "intersection", "grow-diag-final-and", "union"):
        s = alignment_scores([links_from_weights(m, meth) for m in mats], gold)
        print(f"layers {layers} shift {shift} ep {epochs} k {k} lr {lr} {meth:20s} P {s['precision']:.3f} R {s['recall']:.3f} F1 {s['f1']:.3f} n {s['predicted']}", flush=True)
    return mats

import json
configs = json.loads(sys.argv[1])
for c in configs:
    t0 = time.time(); run(tuple(c["layers"]), c["shift"], epochs=c.get("epochs", 3), lr=c.get("lr", 2e-3), k=c.get("k", 64)); print(f"  {c} ({time.time()-t0:.0f}s)", flush=True)
