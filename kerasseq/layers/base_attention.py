"""`BaseAttention`: the weights and arguments of the three attention sublayers."""

import keras

from kerasseq._validation import check_positive_int
from kerasseq.layers.multi_head_attention import MultiHeadAttention


def resolve_key_dim(d_model, num_heads, key_dim=None):
    """Returns `key_dim`, defaulting to `d_model // num_heads` (which must be exact)."""
    check_positive_int("num_heads", num_heads)
    if key_dim is not None:
        return key_dim
    if d_model % num_heads != 0:
        raise ValueError("d_model must be divisible by num_heads. "
                         f"Received: d_model={d_model}, num_heads={num_heads}")
    return d_model // num_heads


@keras.saving.register_keras_serializable(package="kerasseq")
class BaseAttention(keras.layers.Layer):
    """A multi-head attention with its dropout and LayerNorm, as in the TF Transformer tutorial.

    Holds `attention` (a `MultiHeadAttention`), `dropout_layer` and
    `layer_norm`; each subclass (`GlobalSelfAttention`,
    `CausalSelfAttention`, `CrossAttention`) writes its own `call`:
    post-norm `y = LayerNorm(x + Dropout(MultiHead(x, ...)))` (Vaswani et
    al., 2017) or, with `norm_first=True`, pre-norm
    `y = x + Dropout(MultiHead(LayerNorm(x), ...))` (Xiong et al., 2020).

    Args:
        d_model: model width; the last dimension of the input and the output.
        num_heads: number of attention heads.
        dropout: dropout rate, used on the attention weights and on the
            attention output before the residual addition.
        key_dim: per-head size; defaults to `d_model // num_heads` (then
            `d_model` must be divisible by `num_heads`).
        norm_first: pre-norm if True, post-norm (the paper) if False.
        layer_norm_epsilon: epsilon of the LayerNormalization.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments every subclass takes, besides its inputs and masks:
        return_attention_scores: if True, also return the attention weights
            `(batch_size, num_heads, target_length, source_length)`.
        training: Python bool or `None` (dropout).
    """

    attends_context = False  # CrossAttention: keys and values from its 2nd input

    def __init__(self, d_model, num_heads, dropout=0.0, key_dim=None, norm_first=False,
                 layer_norm_epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.d_model, self.num_heads, self.dropout = d_model, num_heads, dropout
        self.key_dim = resolve_key_dim(d_model, num_heads, key_dim)
        self.norm_first, self.layer_norm_epsilon = norm_first, layer_norm_epsilon
        self.supports_masking = True  # the Keras mask of x passes on
        self.attention = MultiHeadAttention(num_heads=num_heads, key_dim=self.key_dim,
                                            dropout=dropout, output_dim=d_model,
                                            dtype=self.dtype_policy, name="attention")
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm")

    def build(self, x_shape):
        """Self-attention: the keys and values come from `x` too."""
        self.build_sublayers(x_shape, x_shape)

    def build_sublayers(self, x_shape, context_shape):
        if x_shape[-1] is not None and x_shape[-1] != self.d_model:
            raise ValueError("The last dimension of the input must equal d_model. "
                             f"Received: input shape={tuple(x_shape)}, d_model={self.d_model}")
        self.attention.build(x_shape, context_shape)
        self.layer_norm.build(x_shape)

    def build_cache(self, batch_size=None, max_length=None, context=None):
        """The key/value cache of `call_step`: `MultiHeadAttention.build_cache`."""
        return self.attention.build_cache(batch_size, max_length, context)

    def compute_output_shape(self, x_shape, *args, **kwargs):
        return tuple(x_shape)

    def compute_output_spec(self, x, *args, return_attention_scores=False, **kwargs):
        outputs = keras.KerasTensor(x.shape, self.compute_dtype)
        if not return_attention_scores:
            return outputs
        keys = (args[0] if args else kwargs["context"]) if self.attends_context else x
        scores_shape = (x.shape[0], self.num_heads, x.shape[1], keys.shape[1])
        return outputs, keras.KerasTensor(scores_shape, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, num_heads=self.num_heads, dropout=self.dropout,
                      key_dim=self.key_dim, norm_first=self.norm_first,
                      layer_norm_epsilon=self.layer_norm_epsilon)
        return config
