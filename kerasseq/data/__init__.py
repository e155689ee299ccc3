"""Text data for kerasseq: tokenizers (characters, words, WordPiece subwords),
the embedded CMUdict G2P dataset, TSV sentence pairs, text pairs by dataset
name (`load_pairs`, what `kerasseq train --dataset NAME` uses) and
teacher-forcing `tf.data` pipelines."""

from kerasseq.data.cmudict import (
    entries_to_pairs,
    load_cmudict,
    load_cmudict_tokenizers,
    parse_cmudict_lines,
)
from kerasseq.data.corpora import learn_tokenizers, load_pairs, spread_sample
from kerasseq.data.pipeline import (
    batch_shapes,
    make_dataset,
    make_source_dataset,
    pad_batch,
)
from kerasseq.data.sword import BiblePair, SwordError, load_bible_pairs
from kerasseq.data.tokenizer import (
    END_ID,
    END_TOKEN,
    PAD_ID,
    PAD_TOKEN,
    RESERVED_TOKENS,
    START_ID,
    START_TOKEN,
    UNK_ID,
    UNK_TOKEN,
    TextTokenizer,
)
from kerasseq.data.tsv import load_tsv_pairs
from kerasseq.data.wordpiece_tokenizer import WordPieceTextTokenizer

__all__ = [
    "BiblePair",
    "END_ID",
    "END_TOKEN",
    "PAD_ID",
    "PAD_TOKEN",
    "RESERVED_TOKENS",
    "START_ID",
    "START_TOKEN",
    "UNK_ID",
    "UNK_TOKEN",
    "SwordError",
    "TextTokenizer",
    "WordPieceTextTokenizer",
    "batch_shapes",
    "entries_to_pairs",
    "learn_tokenizers",
    "load_cmudict",
    "load_bible_pairs",
    "load_cmudict_tokenizers",
    "load_pairs",
    "load_tsv_pairs",
    "make_dataset",
    "pad_batch",
    "make_source_dataset",
    "parse_cmudict_lines",
    "spread_sample",
]
