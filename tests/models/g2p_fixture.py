"""A tiny G2P task shared by the model tests: 30 CMUdict training words, and
the models built and trained on it."""

import functools

from kerasseq.data import TextTokenizer, entries_to_pairs, load_cmudict


@functools.lru_cache(maxsize=None)
def tiny_g2p(count=30):
    entries = [(w, prons[:1]) for w, prons in load_cmudict("train")[1000:] if 3 <= len(w) <= 7][:count]
    pairs = entries_to_pairs(entries)
    source = TextTokenizer.from_texts([w for w, _ in pairs], split="character")
    target = TextTokenizer.from_texts([p for _, p in pairs], split="whitespace")
    return entries, pairs, source, target


def tiny_g2p_model(build, seed, **build_kwargs):
    """`build(**build_kwargs)` with the `tiny_g2p()` tokenizers, its weights
    drawn after `keras.utils.set_random_seed(seed)`."""
    import keras

    keras.utils.set_random_seed(seed)
    _, _, source, target = tiny_g2p()
    return build(source_tokenizer=source, target_tokenizer=target, **build_kwargs)


def train_on_tiny_g2p(model, epochs, learning_rate=1e-2, clipnorm=None, metrics=None):
    """Fits `model` (built by `tiny_g2p_model`) for `epochs` on the 30 words,
    in batches of 10, with Adam and the masked cross-entropy.

    Returns:
        `(model, entries)`.
    """
    import keras

    from kerasseq.data import make_dataset
    from kerasseq.training import MaskedSparseCategoricalCrossentropy

    entries, pairs, source, target = tiny_g2p()
    model.compile(optimizer=keras.optimizers.Adam(learning_rate, clipnorm=clipnorm),
                  loss=MaskedSparseCategoricalCrossentropy(), metrics=metrics)
    model.fit(make_dataset(pairs, source, target, batch_size=10, seed=0), epochs=epochs, verbose=0)
    return model, entries


def trained_tiny_g2p_rnn(seed, epochs):
    """An attention RNN trained briefly on `tiny_g2p()`, so outputs differ by word.

    Returns:
        `(model, words, pairs)`.
    """
    from kerasseq.models import build_rnn_seq2seq

    model, entries = train_on_tiny_g2p(
        tiny_g2p_model(build_rnn_seq2seq, seed, embedding_dim=16, units=32, max_target_length=10),
        epochs)
    return model, [word for word, _ in entries], tiny_g2p()[1]
