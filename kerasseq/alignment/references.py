"""Reference links for guided training: eflomal's word alignments spread over pieces."""

import hashlib
import json
import os
import tempfile

import numpy as np

from kerasseq._files import replace_atomically
from kerasseq.alignment.merge import word_starts
from kerasseq.alignment.scores import from_pharaoh, symmetrize
from kerasseq.data.wordpiece_tokenizer import SUFFIX_INDICATOR


def _piece_words(tokenizer, rows):
    """Per row: the words (lower-cased, pieces joined) and the word index of every piece."""
    vocabulary = tokenizer.get_vocabulary()
    words, indices = [], []
    for ids in rows:
        ids = np.asarray(ids, np.int64)
        index = np.maximum(np.cumsum(word_starts(tokenizer, ids)) - 1, 0)  # a leading ##: word 0
        pieces = [vocabulary[i] if 0 <= i < len(vocabulary) else "[UNK]" for i in ids]
        row_words = [""] * (int(index[-1]) + 1 if len(ids) else 0)
        for piece, word in zip(pieces, index, strict=True):
            if piece.startswith(SUFFIX_INDICATOR) and piece != SUFFIX_INDICATOR:
                piece = piece[len(SUFFIX_INDICATOR):]
            row_words[word] += piece
        words.append([word.lower() for word in row_words])
        indices.append(index)
    return words, indices


def word_links_to_pieces(word_links, source_word_of_piece, target_word_of_piece):
    """Word links `(i, j)` → piece links `(target_piece, source_piece)` of one pair.

    Every piece of source word `i` is linked to every piece of target word
    `j` (how subword models are trained on word alignments: Garg et al. 2019).

    Returns:
        int32 NumPy `(n, 2)`, sorted.
    """
    source_pieces, target_pieces = {}, {}
    for piece, word in enumerate(np.asarray(source_word_of_piece).tolist()):
        source_pieces.setdefault(word, []).append(piece)
    for piece, word in enumerate(np.asarray(target_word_of_piece).tolist()):
        target_pieces.setdefault(word, []).append(piece)
    links = sorted({(t, s) for i, j in word_links
                    for t in target_pieces.get(j, ()) for s in source_pieces.get(i, ())})
    return np.asarray(links, np.int32).reshape([-1, 2])


def _eflomal_word_links(source_words, target_words, symmetrization):
    try:
        import eflomal
    except ImportError:
        raise ImportError(
            "Reference alignments need eflomal (a Bayesian IBM-model word aligner), which is "
            "not installed: pip install 'kerasseq[align]' (or pip install eflomal).") from None

    with tempfile.TemporaryDirectory() as directory:
        forward, reverse = os.path.join(directory, "fwd"), os.path.join(directory, "rev")
        # eflomal needs a token on both sides of every line; empty sides get none back
        eflomal.Aligner().align([" ".join(words) or "." for words in source_words],
                                [" ".join(words) or "." for words in target_words],
                                links_filename_fwd=forward, links_filename_rev=reverse,
                                quiet=True)
        read = {}
        for name, path in (("forward", forward), ("reverse", reverse)):
            with open(path, encoding="utf-8") as handle:
                read[name] = [from_pharaoh(line) for line in handle.read().splitlines()]
    return [symmetrize(f, r, symmetrization) if s and t else []
            for f, r, s, t in zip(read["forward"], read["reverse"], source_words, target_words,
                                  strict=True)]


def reference_alignments(sources, targets, source_tokenizer, target_tokenizer,
                         cache_path=None, symmetrization="grow-diag-final-and"):
    """Piece links of text pairs from eflomal's word alignments, for guided training.

    eflomal (Östling & Tiedemann 2016) aligns the pairs' words both ways
    without supervision; the two directions are symmetrised
    (`symmetrize`, grow-diag-final-and by default) and each word link is
    spread over the pieces of its two words (`word_links_to_pieces`). Words
    are the tokenizers' (a WordPiece word is its pieces joined), lower-cased.
    Give it the *training* pairs only: dev and test verses must stay unseen.

    Args:
        sources, targets: lists of str of the same length.
        source_tokenizer, target_tokenizer: the model's `TextTokenizer`s.
        cache_path: optional `.npz` path. When it holds the links of the
            same texts, tokenizers and settings they are read from it;
            otherwise eflomal runs and the file is (atomically) written.
        symmetrization: `"grow-diag-final-and"`, `"intersection"` or `"union"`.

    Returns:
        A list with one int32 `(n, 2)` array of `(target_piece,
        source_piece)` links per pair, ready for
        `kerasseq.data.make_dataset(..., alignments=...)`.

    Raises:
        ImportError: eflomal is not installed (the `align` extra).
    """
    if len(sources) != len(targets):
        raise ValueError(f"sources and targets must have the same length. Received "
                         f"{len(sources)} and {len(targets)}.")
    if symmetrization not in ("grow-diag-final-and", "intersection", "union"):
        raise ValueError("symmetrization must be 'grow-diag-final-and', 'intersection' or "
                         f"'union'. Received: symmetrization={symmetrization!r}")
    key = hashlib.sha256(json.dumps(
        [list(sources), list(targets), source_tokenizer.get_vocabulary(),
         target_tokenizer.get_vocabulary(), symmetrization], ensure_ascii=False).encode()
    ).hexdigest()
    if cache_path is not None:
        if os.path.exists(cache_path):
            with np.load(cache_path) as cached:
                if str(cached["key"]) == key:
                    return np.split(cached["links"], np.cumsum(cached["counts"])[:-1])
    source_words, source_index = _piece_words(
        source_tokenizer, source_tokenizer.encode(list(sources)).to_list())
    target_words, target_index = _piece_words(
        target_tokenizer, target_tokenizer.encode(list(targets)).to_list())
    word_links = _eflomal_word_links(source_words, target_words, symmetrization)
    links = [word_links_to_pieces(pair, s, t)
             for pair, s, t in zip(word_links, source_index, target_index, strict=True)]
    if cache_path is not None:
        def write(path):
            with open(path, "wb") as handle:
                np.savez(handle, key=key, counts=np.array([len(x) for x in links] or [0]),
                         links=np.concatenate(links or [np.zeros([0, 2], np.int32)]))

        replace_atomically(write, cache_path, suffix=".npz")
    return links
