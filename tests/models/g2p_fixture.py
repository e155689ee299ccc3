"""A tiny G2P task shared by the model tests: 30 CMUdict training words."""

import functools

from kerasseq.data import TextTokenizer, entries_to_pairs, load_cmudict


@functools.lru_cache(maxsize=None)
def tiny_g2p(count=30):
    entries = [(w, prons[:1]) for w, prons in load_cmudict("train")[1000:] if 3 <= len(w) <= 7][:count]
    pairs = entries_to_pairs(entries)
    source = TextTokenizer.from_texts([w for w, _ in pairs], split="character")
    target = TextTokenizer.from_texts([p for _, p in pairs], split="whitespace")
    return entries, pairs, source, target
