# Dev only: readings of the guided head beyond links_from_weights' five.
import pickle, sys, numpy as np
sys.path.insert(0, "/work/main"); sys.path.append("/tmp/item2/site")
from kerasseq.alignment import alignment_scores, links_from_weights, symmetrize
d = pickle.load(open("/tmp/item2/dev.pkl", "rb"))
L, H = d["guided"]
gold = d["links"]
mats = [h[L, H] for h in d["heads"]]
avg = [h.mean(axis=(0, 1)) for h in d["heads"]]

def itermax(W, max_count=2, alpha=0.9):
    """SimAlign-style: mutual arg-max, then again among words left unlinked (rows or columns)."""
    T, S = W.shape
    fwd = np.zeros((T, S), bool); fwd[np.arange(T), W.argmax(1)] = True
    bwd = np.zeros((T, S), bool); bwd[W.argmax(0), np.arange(S)] = True
    inter = fwd & bwd
    if min(T, S) <= 2:
        return inter
    for _ in range(max_count - 1):
        row_free = ~inter.any(1)[:, None] * np.ones((1, S), bool)
        col_free = ~inter.any(0)[None, :] * np.ones((T, 1), bool)
        if row_free.sum() < 1 or col_free.sum() < 1:
            break
        mask = np.clip(alpha * row_free + alpha * col_free, 0, 1)
        allowed = row_free | col_free
        Wn = W * mask
        f = np.zeros((T, S), bool); f[np.arange(T), Wn.argmax(1)] = True
        b = np.zeros((T, S), bool); b[Wn.argmax(0), np.arange(S)] = True
        new = f & b & allowed
        if not (new & ~inter).any():
            break
        inter |= new
    return inter

def links(m):
    j, i = np.nonzero(m)
    return sorted(zip(i.tolist(), j.tolist()))

def show(name, pred):
    s = alignment_scores(pred, gold)
    print(f"{name:50s} P {s['precision']:.3f} R {s['recall']:.3f} F1 {s['f1']:.3f} n {s['predicted']}")

for label, ms in (("guided", mats), ("avg", avg)):
    for meth in ("target", "intersection", "grow-diag-final-and"):
        show(f"{label} {meth}", [links_from_weights(m, meth) for m in ms])
    for mc in (2, 3, 4):
        for a in (0.9, 0.95, 1.0):
            show(f"{label} itermax{mc} a{a}", [links(itermax(m, mc, a)) for m in ms])
from scipy.optimize import linear_sum_assignment
def match(W, floor=0.0):
    r, c = linear_sum_assignment(-W)
    return sorted((int(i), int(j)) for j, i in zip(r, c) if W[j, i] > floor)
for label, ms in (("guided", mats), ("avg", avg)):
    show(f"{label} match", [match(m) for m in ms])
    # match in the product of row- and column-normalised weights
    show(f"{label} match colnorm", [match(m * (m / m.sum(0, keepdims=True))) for m in ms])
    for mc in (2, 3):
        show(f"{label} itermax{mc} colnorm-product", [links(itermax(np.sqrt(m * (m / m.sum(0, keepdims=True))), mc, 0.9)) for m in ms])
