"""Diagnostic: seconds per training step of every `fit` call, per model and jit setting.

`train_throughput.py` reports medians; this script prints every timed `fit`
(interleaved: kerasseq / keras-hub, `jit_compile` off / on) so that stalls and
bimodal timings are visible instead of being folded into a median. It reuses
the models, batches and optimizer of `train_throughput.py` (full settings:
d_model 128, 4 heads, dff 512, 2 layers, batch 64, shape (64, 24)).

    taskset -c 1 .venv/bin/python benchmarks/train_step_times.py --rounds 2 --steps 10
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import train_throughput as throughput  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.steps < 1:
        parser.error("--rounds and --steps must be >= 1")
    settings = dict(throughput.SETTINGS["full"])
    length = 24
    batches, _, source_tokenizer, target_tokenizer = throughput.fixed_shape_batches(
        settings, args.steps + 3, length, length)
    vocab = (source_tokenizer.vocabulary_size, target_tokenizer.vocabulary_size)
    models = {}
    for name, builder in (("kerasseq", throughput.kerasseq_model),
                          ("keras-hub", throughput.keras_hub_model)):
        for jit in (False, True):
            model = throughput.compile_model(builder(settings, *vocab, length), jit)
            throughput.timed_fit(model, batches[:3], 3)  # trace / compile, not timed
            models[name, jit] = model
    times = {key: [] for key in models}
    for round_index in range(args.rounds):
        for (name, jit), model in models.items():
            seconds = throughput.timed_fit(model, batches[3:], args.steps)
            times[name, jit].append(seconds / args.steps)
            print(f"round {round_index}  {name:<9} jit_compile={str(jit):<5} "
                  f"{seconds / args.steps:.4f} s/step", flush=True)
    return times


if __name__ == "__main__":
    main()
