"""The Transformer's last layer: the projection to the vocabulary, optionally tied."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasseq")
class OutputProjection(keras.layers.Layer):
    """Final projection to the vocabulary, `logits = x W + b`, optionally tied.

    With `embedding=None` it is a Dense layer with kernel `W` `(d_model,
    vocab_size)`. With an `embedding` (a `keras.layers.Embedding`) it reuses
    that matrix, `W = E^T` (weight tying: Press & Wolf, 2017, "Using the
    Output Embedding to Improve Language Models"; Vaswani et al., 2017,
    section 3.4), and owns only the bias `b` `(vocab_size,)`, so `E` stays one
    variable. The model that owns this layer rebuilds the embedding from its
    own config, which is why the embedding is not part of this layer's config.

    The logits carry no Keras mask: kerasseq's losses and metrics mask padding
    themselves, and a mask on `y_pred` would make Keras re-weight the loss a
    second time.

    Args:
        vocab_size: int, number of output classes.
        embedding: optional `keras.layers.Embedding` to tie to.
        use_bias: whether to add the bias `b`.
        **kwargs: standard `keras.layers.Layer` arguments (`dtype="float32"`
            keeps the logits in float32 under mixed precision).

    Call arguments:
        x: `(batch_size, length, d_model)`.

    Returns:
        `(batch_size, length, vocab_size)`.
    """

    def __init__(self, vocab_size, embedding=None, use_bias=True, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding = embedding
        self.use_bias = use_bias
        self.supports_masking = True  # accepts the decoder's mask, emits none

    def build(self, x_shape):
        self.kernel = None
        if self.embedding is None:
            self.kernel = self.add_weight(name="kernel", shape=(x_shape[-1], self.vocab_size),
                                          initializer="glorot_uniform")
        self.bias = (
            self.add_weight(name="bias", shape=(self.vocab_size,), initializer="zeros")
            if self.use_bias else None
        )
        self.built = True

    def call(self, x):
        if self.embedding is None:
            kernel = ops.cast(self.kernel, self.compute_dtype)  # (d_model, vocab_size)
        else:
            kernel = ops.transpose(ops.cast(self.embedding.embeddings, self.compute_dtype))
            # (d_model, vocab_size)
        logits = ops.matmul(ops.cast(x, self.compute_dtype), kernel)
        # (batch_size, length, vocab_size)
        return logits + ops.cast(self.bias, self.compute_dtype) if self.use_bias else logits

    def compute_mask(self, x, mask=None):
        return None

    def compute_output_shape(self, x_shape):
        return tuple(x_shape[:-1]) + (self.vocab_size,)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, use_bias=self.use_bias)
        return config
