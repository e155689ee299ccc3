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


def trained_tiny_g2p_rnn(seed, epochs):
    """An attention RNN trained briefly on `tiny_g2p()`, so outputs differ by word.

    Returns:
        `(model, words, pairs)`.
    """
    import keras

    from kerasseq.data import make_dataset
    from kerasseq.models import build_rnn_seq2seq
    from kerasseq.training import MaskedSparseCategoricalCrossentropy

    keras.utils.set_random_seed(seed)
    entries, pairs, source, target = tiny_g2p()
    model = build_rnn_seq2seq(embedding_dim=16, units=32, max_target_length=10,
                              source_tokenizer=source, target_tokenizer=target)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=MaskedSparseCategoricalCrossentropy())
    model.fit(make_dataset(pairs, source, target, batch_size=10, seed=0), epochs=epochs, verbose=0)
    return model, [word for word, _ in entries], pairs
