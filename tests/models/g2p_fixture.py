"""A tiny G2P task shared by the model tests: 30 CMUdict training words, and
the models built and trained on it."""

import functools
import os

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


def compile_for_tiny_g2p(model, learning_rate=1e-2, clipnorm=None, metrics=None):
    """Adam and the masked cross-entropy: how the tiny G2P models train."""
    import keras

    from kerasseq.training import MaskedSparseCategoricalCrossentropy

    model.compile(optimizer=keras.optimizers.Adam(learning_rate, clipnorm=clipnorm),
                  loss=MaskedSparseCategoricalCrossentropy(), metrics=metrics)
    return model


def train_on_tiny_g2p(model, epochs, learning_rate=1e-2, clipnorm=None, metrics=None):
    """Fits `model` (built by `tiny_g2p_model`) for `epochs` on the 30 words,
    in batches of 10, compiled by `compile_for_tiny_g2p`.

    Returns:
        `(model, entries)`.
    """
    from kerasseq.data import make_dataset

    entries, pairs, source, target = tiny_g2p()
    compile_for_tiny_g2p(model, learning_rate, clipnorm, metrics)
    model.fit(make_dataset(pairs, source, target, batch_size=10, seed=0), epochs=epochs, verbose=0)
    return model, entries


# Where `trained_tiny_g2p_rnn` keeps the weights it trained, for the other
# pytest-xdist workers of the session (tests/conftest.py sets it); None: in
# this process only.
SHARED_DIRECTORY = None


def made_once(name, make):
    """The path of `name` (a file or a folder) that `make(path)` writes, made
    once per session: by the first process to ask, under a lock, in
    `SHARED_DIRECTORY` (a new temporary folder when it is None). The other
    processes wait for it and share it: whoever reads it must not change it.
    A made file or folder is marked complete only once `make` returned."""
    import fcntl
    import shutil
    import tempfile

    directory = SHARED_DIRECTORY or tempfile.mkdtemp(prefix="kerasseq-tests-")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(path + ".complete"):
            if os.path.isdir(path):  # a process that died while making it
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)
            make(path)
            open(path + ".complete", "w").close()
    return path


def _tiny_g2p_rnn(seed, **settings):
    from kerasseq.models import build_rnn_seq2seq

    return tiny_g2p_model(build_rnn_seq2seq, seed, embedding_dim=16, units=32, max_target_length=10,
                          **settings)


@functools.lru_cache(maxsize=None)
def _trained_tiny_g2p_rnn_weights(seed, epochs):
    """The weights of `_tiny_g2p_rnn(seed)` after `epochs` on the 30 words.

    Trained once per session: the first process to need them trains and
    writes them to `SHARED_DIRECTORY` (under a lock), the others read them
    there. The training is seeded, so the weights are those each process
    would train (a training costs ~5 CPU-s, nearly all of it tracing)."""
    import numpy as np

    def train(path):
        weights = train_on_tiny_g2p(_tiny_g2p_rnn(seed), epochs)[0].get_weights()
        with open(path, "wb") as handle:
            np.savez(handle, *weights)

    with np.load(made_once(f"tiny_g2p_rnn_{seed}_{epochs}.npz", train)) as stored:
        return [stored[f"arr_{index}"] for index in range(len(stored.files))]


def trained_tiny_g2p_rnn(seed, epochs, use_cudnn=False, clipnorm=None, metrics=None):
    """An attention RNN trained briefly on `tiny_g2p()`, so outputs differ by word.

    `use_cudnn` is the new model's setting (the weights are the same either way:
    they are trained with `use_cudnn=False`); `clipnorm` and `metrics` are
    those of its compile (`compile_for_tiny_g2p`). Each call returns a new
    model holding the trained weights, which are trained once per session for
    each `(seed, epochs)`: what one test file does to its model reaches no other.

    Returns:
        `(model, words, pairs)`.
    """
    weights = _trained_tiny_g2p_rnn_weights(seed, epochs)
    model = _tiny_g2p_rnn(seed, use_cudnn=use_cudnn)
    model.set_weights(weights)
    compile_for_tiny_g2p(model, clipnorm=clipnorm, metrics=metrics)
    model.optimizer.build(model.trainable_variables)  # saved and loaded as after a fit
    entries, pairs, _, _ = tiny_g2p()
    return model, [word for word, _ in entries], pairs
