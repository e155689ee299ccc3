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
    variable.

    How the tie survives saving and cloning. A config cannot hold the
    embedding itself (a copy of it would be a second matrix), so it names
    the embedding by its place in the functional graph: the name of the
    graph layer that is or holds it, then the attributes that lead to it,
    e.g. `"embedding"` (a `keras.layers.Embedding` in the graph) or
    `"target_embedding/token_embedding"` (the `token_embedding` of a
    `PositionalEmbedding` named `target_embedding`). The layer records that
    path when it is first called on a symbolic tensor and the embedding
    leads to that tensor; a layer built from such a config (by
    `keras.models.load_model`, `keras.models.clone_model`) finds the
    embedding of that name among the layers that lead to its input when it
    is called in the new graph, so the copy is tied to the copy's
    embedding. `get_config` of a tied layer never called that way raises a
    `ValueError` rather than write a config that would load untied.

    The logits carry no Keras mask: kerasseq's losses and metrics mask padding
    themselves.

    Args:
        vocab_size: int, number of output classes.
        embedding: optional `keras.layers.Embedding` to tie to, or the path
            of one in the functional graph the layer is called in (a str, as
            `get_config` writes it).
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
        if embedding is not None and not isinstance(embedding, (str, keras.layers.Embedding)):
            raise TypeError("embedding must be a keras.layers.Embedding, the path of one in the "
                            "functional graph (a str, as in a config), or None. Received: "
                            f"embedding={embedding!r}")
        self.vocab_size = vocab_size
        self.embedding = embedding
        self.use_bias = use_bias
        # The embedding's place in the functional graph ("layer/attribute/...").
        self.embedding_path = embedding if isinstance(embedding, str) else None
        self.supports_masking = True  # accepts the decoder's mask, emits none

    def __call__(self, x, *args, **kwargs):
        if self.embedding is not None and isinstance(x, keras.KerasTensor):
            if isinstance(self.embedding, str):
                self.embedding = _find_embedding(self.embedding, x, self.name)
            elif self.embedding_path is None:
                self.embedding_path = _embedding_path(self.embedding, x)
        return super().__call__(x, *args, **kwargs)

    def get_build_config(self):
        # keras.models.load_model builds a layer from this before calling it in
        # the graph; a tied layer must find its embedding first, at that call.
        return None if self.embedding is not None else super().get_build_config()

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
        elif isinstance(self.embedding, str):
            raise ValueError(
                f"OutputProjection {self.name!r} is tied to the embedding {self.embedding!r} of "
                "a functional graph; it finds it when called on a symbolic tensor of that graph "
                "(keras.Input → ... → this layer), not on a tensor of values")
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
        if self.embedding is not None:
            if self.embedding_path is None:
                raise ValueError(
                    f"OutputProjection {self.name!r} is tied to the embedding "
                    f"{self.embedding.name!r}, and its config can only name that embedding by "
                    "its place in a functional graph: call the layer on a symbolic tensor to "
                    "which the embedding leads (keras.Input → the embedding → ... → this layer) "
                    "before saving or cloning. A config without it would load untied.")
            config["embedding"] = self.embedding_path
        return config


def _upstream_layers(tensor):
    """The layers of the functional graph that lead to a `keras.KerasTensor`,
    nearest first (read from Keras' record of each symbolic tensor's origin)."""
    layers, seen, queue = [], set(), [tensor]
    while queue:
        history = getattr(queue.pop(0), "_keras_history", None)
        if history is None:
            continue
        operation, node_index = history[0], history[1]
        if id(operation) in seen:
            continue
        seen.add(id(operation))
        layers.append(operation)
        queue.extend(operation._inbound_nodes[node_index].input_tensors)
    return layers


def _attribute_path(layer, target, depth=3):
    """Public attribute names leading from `layer` to `target` ([] for the layer
    itself), or None."""
    if layer is target:
        return []
    if depth == 0:
        return None
    for name, value in vars(layer).items():
        if not name.startswith("_") and isinstance(value, keras.layers.Layer):
            path = _attribute_path(value, target, depth - 1)
            if path is not None:
                return [name, *path]
    return None


def _embedding_path(embedding, tensor):
    """`"layer/attribute/..."`: where `embedding` sits among the layers leading to
    `tensor`, or None when it does not lead there."""
    for layer in _upstream_layers(tensor):
        path = _attribute_path(layer, embedding)
        if path is not None:
            return "/".join([layer.name, *path])
    return None


def _find_embedding(path, tensor, owner):
    """The `keras.layers.Embedding` at `path` among the layers leading to `tensor`."""
    head, *attributes = path.split("/")
    for layer in _upstream_layers(tensor):
        if layer.name == head:
            found = layer
            for attribute in attributes:
                found = getattr(found, attribute, None)
            if isinstance(found, keras.layers.Embedding):
                return found
            raise ValueError(f"OutputProjection {owner!r} is tied to the embedding {path!r}, but "
                             f"that is a {type(found).__name__}, not a keras.layers.Embedding")
    raise ValueError(
        f"OutputProjection {owner!r} is tied to the embedding {path!r}, but no layer named "
        f"{head!r} leads to its input in this graph: call it on a tensor that the embedding's "
        "layer leads to")
