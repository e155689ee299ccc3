"""TFLite for grapheme-to-phoneme: file sizes, and what quantization costs on dev.

For a trained G2P model (`.keras`, e.g. `runs/demo/model.keras` from `make
demo`) this script writes two `.tflite` files with `kerasseq.tflite.export_tflite`
(float32 weights, and dynamic-range quantization: int8 weights, float
activations) and decodes the same dev words three ways with greedy search:

- Keras: `model.generate(method="greedy")`;
- TFLite float32: `TFLiteGreedyDecoder` over the float file;
- TFLite dynamic range: the same over the quantized file.

It prints the `.keras` and `.tflite` sizes, word and phoneme error rates
(`kerasseq.evaluation.g2p_error_rates`, every CMUdict pronunciation of a word
counts) and the share of words whose output equals Keras' output, side by
side, plus the time per batch of each path (same machine, same run).

    .venv/bin/python benchmarks/tflite_g2p.py --model runs/demo/model.keras --limit 2000
"""

import argparse
import os
import tempfile
import time

import keras
import numpy as np

from kerasseq.data import load_cmudict
from kerasseq.evaluation import g2p_error_rates
from kerasseq.tflite import TFLiteGreedyDecoder, export_tflite


def decode_all(decode, source_ids, batch_size):
    """Token ids `(rows, max_length)` decoded batch by batch, and seconds per batch."""
    outputs, start = [], time.perf_counter()
    for begin in range(0, len(source_ids), batch_size):
        outputs.append(np.asarray(decode(source_ids[begin:begin + batch_size])))
    seconds = (time.perf_counter() - start) / max(1, len(outputs))
    return np.concatenate(outputs), seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a trained G2P model (.keras)")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--limit", type=int, default=2000, help="first N words of the split")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=32)
    args = parser.parse_args(argv)

    model = keras.models.load_model(args.model)
    entries = load_cmudict(args.split)[: args.limit]
    words = [word for word, _ in entries]
    references = [pronunciations for _, pronunciations in entries]
    source_ids = model.source_tokenizer.encode(words).to_tensor().numpy()
    source_length = source_ids.shape[1]

    with tempfile.TemporaryDirectory() as directory:
        paths = {
            quantize: export_tflite(
                model, os.path.join(directory, f"g2p_{quantize or 'float32'}.tflite"),
                batch_size=args.batch_size, source_length=source_length,
                max_length=args.max_length, quantize=quantize,
            )
            for quantize in (None, "dynamic_range")
        }
        sizes = {quantize: os.path.getsize(path) for quantize, path in paths.items()}
        decoders = {quantize: TFLiteGreedyDecoder(path) for quantize, path in paths.items()}

    def keras_greedy(batch):
        return model.generate(batch, method="greedy", max_length=args.max_length)[0][:, 0]

    def tflite_greedy(decoder):
        return lambda batch: decoder.greedy(batch, args.max_length)[0]

    runs = {"Keras (greedy)": keras_greedy}
    runs["TFLite float32"] = tflite_greedy(decoders[None])
    runs["TFLite dynamic range"] = tflite_greedy(decoders["dynamic_range"])
    results = {name: decode_all(decode, source_ids, args.batch_size) for name, decode in runs.items()}
    reference_tokens = results["Keras (greedy)"][0]

    keras_size = os.path.getsize(args.model)
    print(f"model: {args.model} ({model.count_params():,} parameters, .keras {keras_size / 1e6:.2f} MB)")
    print(f"{args.split}: first {len(words)} words, batch {args.batch_size}, "
          f"source length {source_length}, max_length {args.max_length}")
    print(f"{'decoder':24s} {'file (MB)':>10s} {'WER %':>7s} {'PER %':>7s} "
          f"{'same as Keras':>14s} {'s/batch':>8s}")
    files = {"Keras (greedy)": keras_size, "TFLite float32": sizes[None],
             "TFLite dynamic range": sizes["dynamic_range"]}
    for name, (tokens, seconds) in results.items():
        hypotheses = model.target_tokenizer.decode_to_strings(tokens)
        rates = g2p_error_rates(hypotheses, references)
        wer, per = rates["wer"], rates["per"]
        same = float(np.mean(np.all(tokens == reference_tokens, axis=1)))
        print(f"{name:24s} {files[name] / 1e6:10.3f} {100 * wer:7.2f} {100 * per:7.2f} "
              f"{100 * same:13.1f}% {seconds:8.3f}")


if __name__ == "__main__":
    main()
