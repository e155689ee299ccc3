"""CTranslate2 model directories of kerasseq Transformers, and a client that serves them.

CTranslate2 (OpenNMT's C++ inference engine) runs a Transformer from a
directory holding `model.bin`, `config.json` and the vocabularies. This
module builds that directory's contents with CTranslate2's own converter API
(`ctranslate2.specs.TransformerSpec`: `validate`, `optimize(quantization)`,
`save`); `kerasseq.export.export_ctranslate2` writes it atomically.

The mapping, weight by weight (Keras kernels are `(inputs, outputs)`,
CTranslate2's linear weights `(outputs, inputs)`):

| kerasseq                                                  | CTranslate2                              |
|-----------------------------------------------------------|------------------------------------------|
| `source_embedding` / `target_embedding` token matrix      | `encoder.embeddings` / `decoder.embeddings` (scaled by sqrt(d_model), `scale_embeddings`) |
| the sinusoidal table (`positional_encoding`, interleaved sin/cos, position 0 first) | `position_encodings.encodings`, written as weights: CTranslate2's built-in table is concatenated and starts at 1 |
| self-attention query, key, value kernels `(d_model, heads, key_dim)` | one fused `linear[0]` `(3 d_model, d_model)` |
| cross-attention query; key and value                      | `linear[0]`; fused `linear[1]`           |
| attention output kernel `(heads, key_dim, d_model)`       | `linear[-1]`                             |
| each sublayer's LayerNorm (post-norm: after the residual; pre-norm: before) | that sublayer's `layer_norm`, `pre_norm=norm_first` |
| `encoder_norm`, `decoder_norm` (pre-norm only)            | `encoder.layer_norm`, `decoder.layer_norm` |
| feed-forward `intermediate_dense`, `output_dense`         | `ffn.linear_0`, `ffn.linear_1`           |
| `output_projection` (tied: the target embedding matrix)   | `decoder.projection`                     |

Shared and tied matrices are stored once (CTranslate2 aliases equal
variables). The vocabularies are the tokenizers' `get_vocabulary()`, so
token `i` of each vocabulary is id `i` of kerasseq: `[PAD]` 0, `[UNK]` 1
(CTranslate2's `unk_token`), `[START]` 2 (`bos_token`, the decoder's start
token), `[END]` 3 (`eos_token`). The source gets no start or end token, as
in kerasseq.

The directory also holds `kerasseq_ctranslate2.json`: the tokenizers (Keras
configs) and the model's limits, which `CTranslate2Translator` reads to
serve text (`kerasseq translate DIR`).
"""

import json
import os

import keras
import numpy as np

from kerasseq._files import read_format_json
from kerasseq.data.tokenizer import END_TOKEN, PAD_TOKEN, START_TOKEN, UNK_TOKEN
from kerasseq.decoding.config import SearchConfig, SearchConfigError

METADATA_FILE = "kerasseq_ctranslate2.json"
METADATA_FORMAT = "kerasseq-ctranslate2"
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16",
                 "float16", "bfloat16", "float32")
# The `SearchConfig` settings CTranslate2 runs as kerasseq does, and their
# values that it cannot run (each a `SearchConfigError` naming the field).
_UNMAPPED = {"coverage_penalty": 0.0, "max_length_a": 0.0, "temperature": 1.0,
             "top_k": 0, "top_p": 1.0}


def import_ctranslate2():
    """The `ctranslate2` package, or an `ImportError` saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise ImportError("The CTranslate2 export and client need the ctranslate2 package: "
                          "pip install 'kerasseq[ctranslate2]' (or pip install ctranslate2)"
                          ) from None
    return ctranslate2


def is_ctranslate2_model(path):
    """True for a CTranslate2 model directory (one holding `model.bin` and `config.json`)."""
    return (os.path.isdir(path) and os.path.isfile(os.path.join(path, "model.bin"))
            and os.path.isfile(os.path.join(path, "config.json")))


def check_convertible(model):
    """Raise unless `model` is a kerasseq Transformer with tokenizers and ReLU feed-forwards."""
    from kerasseq.models.transformer_seq2seq import TransformerSeq2Seq

    if not isinstance(model, TransformerSeq2Seq):
        raise ValueError("CTranslate2 runs kerasseq Transformers (build_transformer_seq2seq) "
                         f"only. Received: a {type(model).__name__}; serve it with "
                         "export_translator (a SavedModel) instead")
    for name in ("source_tokenizer", "target_tokenizer"):
        if getattr(model, name, None) is None:
            raise ValueError("A CTranslate2 export needs a model built with source_tokenizer "
                             f"and target_tokenizer (its vocabularies). Received: model.{name}=None")
    for block in (*model.encoder_blocks, *model.decoder_blocks):
        if block.feed_forward.activation != "relu":
            raise ValueError("CTranslate2 export supports ReLU feed-forward layers only. "
                             f"Received: activation={block.feed_forward.activation!r} in "
                             f"{block.name}")


def check_quantization(quantization):
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization must be None or one of {list(QUANTIZATIONS)}. "
                         f"Received: quantization={quantization!r}")
    return quantization


def _array(variable):
    return np.asarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)


def _attention_parts(attention):
    """`(query, key, value, output)`, each `(weight (outputs, inputs), bias)`, of a
    kerasseq `MultiHeadAttention` (Keras' einsum layout)."""
    parts = []
    for dense in (attention.query_dense, attention.key_dense, attention.value_dense):
        kernel = _array(dense.kernel)  # (d_model, heads, key_dim)
        parts.append((kernel.reshape(kernel.shape[0], -1).T, _array(dense.bias).reshape(-1)))
    kernel = _array(attention.output_dense.kernel)  # (heads, key_dim, d_model)
    parts.append((kernel.reshape(-1, kernel.shape[-1]).T, _array(attention.output_dense.bias)))
    return parts


def _set_linear(spec, weight, bias):
    spec.weight = np.ascontiguousarray(weight)
    spec.bias = np.ascontiguousarray(bias)


def _set_attention(spec, sublayer, self_attention):
    query, key, value, output = _attention_parts(sublayer.attention)
    if self_attention:  # one fused query/key/value projection
        _set_linear(spec.linear[0], *(np.concatenate(parts) for parts in zip(query, key, value, strict=True)))
    else:  # the query, then keys and values fused
        _set_linear(spec.linear[0], *query)
        _set_linear(spec.linear[1], *(np.concatenate(parts) for parts in zip(key, value, strict=True)))
    _set_linear(spec.linear[-1], *output)
    _set_layer_norm(spec.layer_norm, sublayer.layer_norm)


def _set_layer_norm(spec, layer):
    spec.gamma = _array(layer.gamma)
    spec.beta = _array(layer.beta)


def _set_feed_forward(spec, feed_forward):
    for linear, dense in ((spec.linear_0, feed_forward.intermediate_dense),
                          (spec.linear_1, feed_forward.output_dense)):
        _set_linear(linear, _array(dense.kernel).T, _array(dense.bias))  # Keras: (inputs, outputs)
    _set_layer_norm(spec.layer_norm, feed_forward.layer_norm)


def _set_inputs(spec, embedding, final_norm):
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = _array(embedding.token_embedding.embeddings)
    spec.scale_embeddings = True  # sqrt(d_model), as PositionalEmbedding
    spec.position_encodings.encodings = np.asarray(embedding.encoding_table, np.float32)
    if final_norm is not None:
        _set_layer_norm(spec.layer_norm, final_norm)


def transformer_spec(model):
    """The `ctranslate2.specs.TransformerSpec` of a kerasseq Transformer, weights and
    vocabularies set (not yet validated, optimized or saved)."""
    check_convertible(model)
    import_ctranslate2()
    from ctranslate2.specs import common_spec
    from ctranslate2.specs import transformer_spec as specs

    spec = specs.TransformerSpec.from_config(
        model.num_layers, model.num_heads, pre_norm=bool(model.norm_first),
        activation=common_spec.Activation.RELU)
    _set_inputs(spec.encoder, model.source_embedding, model.encoder_norm)
    for layer, block in zip(spec.encoder.layer, model.encoder_blocks, strict=True):
        _set_attention(layer.self_attention, block.self_attention, self_attention=True)
        _set_feed_forward(layer.ffn, block.feed_forward)
    _set_inputs(spec.decoder, model.target_embedding, model.decoder_norm)
    for layer, block in zip(spec.decoder.layer, model.decoder_blocks, strict=True):
        _set_attention(layer.self_attention, block.causal_self_attention, self_attention=True)
        _set_attention(layer.attention, block.cross_attention, self_attention=False)
        _set_feed_forward(layer.ffn, block.feed_forward)
    projection = model.output_projection
    kernel = (_array(model.target_embedding.token_embedding.embeddings)  # (vocab, d_model)
              if projection.embedding is not None else _array(projection.kernel).T)
    spec.decoder.projection.weight = np.ascontiguousarray(kernel)
    if projection.use_bias:
        spec.decoder.projection.bias = _array(projection.bias)
    config = spec.config
    config.unk_token, config.bos_token, config.eos_token = UNK_TOKEN, START_TOKEN, END_TOKEN
    config.decoder_start_token = START_TOKEN
    config.add_source_bos = config.add_source_eos = False
    config.layer_norm_epsilon = float(model.layer_norm_epsilon)
    spec.register_source_vocabulary(model.source_tokenizer.get_vocabulary())
    spec.register_target_vocabulary(model.target_tokenizer.get_vocabulary())
    return spec


def write_model(model, quantization, directory):
    """Write the CTranslate2 model of `model` into the existing empty `directory`."""
    spec = transformer_spec(model)
    spec.validate()
    spec.optimize(quantization=quantization)
    spec.save(directory)
    metadata = {
        "format": METADATA_FORMAT,
        "model_class": type(model).__name__,
        "quantization": quantization,
        "max_positions": int(model.max_positions),
        "max_target_length": int(model.max_target_length),
        "source_tokenizer": keras.saving.serialize_keras_object(model.source_tokenizer),
        "target_tokenizer": keras.saving.serialize_keras_object(model.target_tokenizer),
    }
    with open(os.path.join(directory, METADATA_FILE), "w", encoding="utf-8") as handle:
        json.dump(metadata, handle, indent=1)


def read_ctranslate2_metadata(path):
    """The metadata of a kerasseq CTranslate2 export, or `None` for anything else."""
    return read_format_json(os.path.join(path, METADATA_FILE), METADATA_FORMAT)


def search_options(config, max_length):
    """`ctranslate2.Translator.translate_batch` keywords for a `SearchConfig`.

    The settings that map (kerasseq → CTranslate2): `num_beams` (1 for greedy
    search) → `beam_size`; `num_return` → `num_hypotheses`;
    `length_penalty` → `length_penalty` (the formulas differ: kerasseq's GNMT
    `((5 + |Y|) / 6) ** alpha` with the end token counted, CTranslate2's
    `|Y| ** alpha` without it; they agree at 0); `max_length` →
    `max_decoding_length` (the end token counted in both); `min_length` →
    `min_decoding_length` (CTranslate2's default is 1, kerasseq's 0);
    `no_repeat_ngram_size`; `ban_unk` → `disable_unk`, and `[PAD]` and
    `[START]` are suppressed as kerasseq's searches never generate them. The source is never cut by CTranslate2
    (`max_input_length=0`): the client cuts it.

    Raises:
        SearchConfigError: a setting CTranslate2 does not run the way kerasseq
            does (sampling, the coverage penalty, `max_length_a`), naming it.
    """
    if config.method not in ("greedy", "beam"):
        raise SearchConfigError("method", "CTranslate2 serves greedy and beam search only. "
                                f"Received: method={config.method!r}")
    for name, default in _UNMAPPED.items():
        if getattr(config, name) != default:
            raise SearchConfigError(name, f"{name} has no CTranslate2 equivalent here; leave it "
                                          f"at {default!r}. Received: {name}="
                                          f"{getattr(config, name)!r}")
    return {"beam_size": config.effective_num_beams, "num_hypotheses": config.num_return,
            "length_penalty": float(config.length_penalty), "max_decoding_length": max_length,
            "min_decoding_length": config.min_length,
            "no_repeat_ngram_size": config.no_repeat_ngram_size, "max_input_length": 0,
            # kerasseq's searches never generate [PAD] or [START], nor [UNK] with ban_unk
            "suppress_sequences": [[PAD_TOKEN], [START_TOKEN]], "disable_unk": config.ban_unk,
            "return_scores": True}


class CTranslate2Translator:
    """Translate text with a CTranslate2 export of a kerasseq Transformer.

    The text is tokenized by the model's own tokenizers (kept in the
    export), cut to `max_source_length` (default: the tokenizer's
    `max_length` and the model's position table), searched by
    `ctranslate2.Translator.translate_batch` with the `SearchConfig`'s
    settings (`search_options`; the same defaults as `kerasseq.Translator`:
    beam search, 4 beams, `max_length` the model's `max_target_length`) and
    detokenized. A blank text (or one without tokens) translates to `""`
    with score 0.0, as everywhere in kerasseq.

    Args:
        path: a directory written by `kerasseq.export.export_ctranslate2`.
        config: optional `SearchConfig`; `settings` replace its fields.
        device, compute_type, inter_threads, intra_threads: passed to
            `ctranslate2.Translator` (`intra_threads=0`: CTranslate2's default).
        **settings: `SearchConfig` fields.

    Raises:
        ValueError: `path` is no kerasseq CTranslate2 export, or a setting
            does not map (`search_options`).
    """

    def __init__(self, path, config=None, *, device="cpu", compute_type="default",
                 inter_threads=1, intra_threads=0, **settings):
        ctranslate2 = import_ctranslate2()
        metadata = read_ctranslate2_metadata(path)
        if metadata is None or not is_ctranslate2_model(path):
            raise ValueError(f"{path!r} is not a CTranslate2 export of kerasseq (no model.bin, "
                             f"config.json and {METADATA_FILE}); write one with "
                             "`kerasseq export MODEL DIR --format ctranslate2`")
        self.config = SearchConfig.from_kwargs(config, **settings)
        self.max_length = self.config.max_length or metadata["max_target_length"]
        if self.max_length > metadata["max_positions"]:
            raise SearchConfigError("max_length", f"max_length must be <= the model's "
                                    f"max_positions={metadata['max_positions']}. Received: "
                                    f"max_length={self.max_length}")
        self.options = search_options(self.config, self.max_length)
        self.source_tokenizer = keras.saving.deserialize_keras_object(metadata["source_tokenizer"])
        self.target_tokenizer = keras.saving.deserialize_keras_object(metadata["target_tokenizer"])
        limits = (self.config.max_source_length, self.source_tokenizer.max_length,
                  metadata["max_positions"])
        self.source_limit = min(limit for limit in limits if limit)
        self._source_tokens = self.source_tokenizer.get_vocabulary()
        self._target_ids = {token: index for index, token in
                            enumerate(self.target_tokenizer.get_vocabulary())}
        self.metadata = metadata
        self.translator = ctranslate2.Translator(
            os.fspath(path), device=device, compute_type=compute_type,
            inter_threads=inter_threads, intra_threads=intra_threads)

    def source_tokens(self, texts):
        """The source tokens of each text, as CTranslate2 reads them (cut to `source_limit`)."""
        ids = self.source_tokenizer.encode(list(texts)).to_list()
        return [[self._source_tokens[index] for index in row[:self.source_limit]]
                for row in ids]

    def target_ids(self, tokens):
        """CTranslate2's output tokens → kerasseq target ids."""
        return [self._target_ids[token] for token in tokens]

    def translate(self, texts, *, return_scores=False):
        """As `kerasseq.Translator.translate`: a str per text (n-best lists with
        `num_return > 1`), and with `return_scores` the hypotheses' scores."""
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{index}] must be a str. Received: {type(text).__name__}")
        returns = self.config.num_return
        results = [([""] * returns, [0.0] * returns) for _ in texts]
        tokens = self.source_tokens(texts) if texts else []
        rows = [row for row, text in enumerate(texts) if tokens[row] and text.strip()]
        if rows:
            outputs = self.translator.translate_batch(
                [tokens[row] for row in rows], max_batch_size=self.config.batch_size,
                **self.options)
            # Every hypothesis detokenized in one call (a call per row costs
            # TensorFlow's eager overhead each time).
            strings = self.target_tokenizer.decode_to_strings(
                [self.target_ids(hypothesis) or [0]
                 for output in outputs for hypothesis in output.hypotheses])
            for index, (row, output) in enumerate(zip(rows, outputs, strict=True)):
                results[row] = (strings[index * returns:(index + 1) * returns],
                                [float(score) for score in output.scores])
        columns = [0, 1] if return_scores else [0]
        outputs = [[result[column] if returns > 1 else result[column][0] for result in results]
                   for column in columns]
        outputs = [output[0] for output in outputs] if single else outputs
        return tuple(outputs) if len(outputs) > 1 else outputs[0]

    __call__ = translate
