"""kerasseq layers: one component per module."""

from kerasseq.layers.bahdanau_attention import BahdanauAttention
from kerasseq.layers.bridge import Bridge
from kerasseq.layers.gru_decoder import GRUDecoder
from kerasseq.layers.lstm_encoder import LSTMEncoder
from kerasseq.layers.luong_attention import LuongAttention

__all__ = ["BahdanauAttention", "Bridge", "GRUDecoder", "LSTMEncoder", "LuongAttention"]
