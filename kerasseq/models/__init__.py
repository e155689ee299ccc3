"""kerasseq models: functional encoder–decoders with the decoding contract."""

# A saved model holds its tokenizers and, compiled, kerasseq's loss, metric and
# schedule: importing the models registers those classes too (as does
# `import kerasseq`, which imports this package).
from kerasseq import data as _data  # noqa: F401
from kerasseq import training as _training  # noqa: F401
from kerasseq.models.base import Seq2SeqModel
from kerasseq.models.ensemble import Ensemble
from kerasseq.models.rnn_seq2seq import RNNSeq2Seq, build_rnn_seq2seq
from kerasseq.models.transformer_seq2seq import (
    TransformerSeq2Seq,
    build_transformer_seq2seq,
)

__all__ = [
    "Ensemble",
    "RNNSeq2Seq",
    "Seq2SeqModel",
    "TransformerSeq2Seq",
    "build_rnn_seq2seq",
    "build_transformer_seq2seq",
]
