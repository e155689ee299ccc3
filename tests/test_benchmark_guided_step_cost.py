"""benchmarks/guided_step_cost.py: the batches it times and a smoke run."""

import importlib.util
import os

import numpy as np
import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                      "guided_step_cost.py")


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("guided_step_cost", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_synthetic_batches_are_all_real_pieces_with_one_link_per_target_piece(script):
    (source, target_in), target_out = script.synthetic_batch(60, batch=3, length=5, guided=False)
    inputs, guided_out = script.synthetic_batch(60, batch=3, length=5, guided=True)
    for ids in (source, target_in, target_out):
        assert ids.shape == (3, 5) and ids.min() >= 4 and ids.max() < 60  # no padding, no specials
    # the same seed: the guided batch is the unguided one plus its links
    np.testing.assert_array_equal(inputs["source_ids"], source)
    np.testing.assert_array_equal(inputs["target_in_ids"], target_in)
    np.testing.assert_array_equal(guided_out, target_out)
    links = inputs["alignment_links"]
    assert links.shape == (3, 5, 5)
    np.testing.assert_array_equal(links.sum(axis=-1), np.ones((3, 5)))
    assert set(np.unique(links)) == {0.0, 1.0}


@pytest.mark.slow
def test_smoke_run_times_both_models(script, capsys):
    medians = script.main(["--smoke"])
    assert set(medians) == {"transformer", "transformer_guided"}
    assert all(seconds > 0 for seconds in medians.values())
    printed = capsys.readouterr().out
    assert "guided / unguided: " in printed and "GFLOP/s before" in printed


def test_matmul_rate_counts_two_flops_per_multiply_add(script, monkeypatch):
    # 2 n^3 flops per product: with a clock that advances 0.5 s per timing of
    # `products` products, the rate is 2 * n^3 * products / 0.5 / 1e9 GFLOP/s
    ticks = iter(np.arange(0.0, 100.0, 0.5))
    monkeypatch.setattr(script.bible.time, "perf_counter", lambda: next(ticks))
    assert script.bible.matmul_gflops(size=1024, products=5) == 21.5
