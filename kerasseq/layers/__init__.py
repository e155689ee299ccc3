"""kerasseq layers: one component per module."""

from kerasseq.layers.bahdanau_attention import BahdanauAttention
from kerasseq.layers.bridge import Bridge
from kerasseq.layers.causal_self_attention import CausalSelfAttention
from kerasseq.layers.cross_attention import CrossAttention
from kerasseq.layers.feed_forward import FeedForward
from kerasseq.layers.global_self_attention import GlobalSelfAttention
from kerasseq.layers.gru_decoder import GRUDecoder
from kerasseq.layers.lstm_encoder import LSTMEncoder
from kerasseq.layers.luong_attention import LuongAttention
from kerasseq.layers.multi_head_attention import MultiHeadAttention
from kerasseq.layers.output_projection import OutputProjection
from kerasseq.layers.positional_embedding import (
    PositionalEmbedding,
    positional_encoding,
)
from kerasseq.layers.recurrent_attention import RecurrentAttention
from kerasseq.layers.transformer_decoder_block import TransformerDecoderBlock
from kerasseq.layers.transformer_encoder_block import TransformerEncoderBlock

__all__ = [
    "BahdanauAttention",
    "Bridge",
    "CausalSelfAttention",
    "CrossAttention",
    "FeedForward",
    "GRUDecoder",
    "GlobalSelfAttention",
    "LSTMEncoder",
    "LuongAttention",
    "MultiHeadAttention",
    "OutputProjection",
    "PositionalEmbedding",
    "RecurrentAttention",
    "TransformerDecoderBlock",
    "TransformerEncoderBlock",
    "positional_encoding",
]
