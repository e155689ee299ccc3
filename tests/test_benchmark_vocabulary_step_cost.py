"""benchmarks/vocabulary_step_cost.py: a smoke run on a slice of the Bibles."""

import importlib.util
import os

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                      "vocabulary_step_cost.py")


@pytest.mark.slow
def test_smoke_run_times_each_vocabulary_on_its_own_batches(capsys):
    spec = importlib.util.spec_from_file_location("vocabulary_step_cost", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    runs = script.main(["--smoke"])
    if runs is None:
        pytest.skip("the SWORD modules of `make examples-data` are not installed")
    (big, large), (small, little) = runs.items()
    assert big > small and large["ids"] > little["ids"]
    # fewer ids cut the verses into more pieces: larger padded batches of the same verses
    assert little["pieces"] > large["pieces"]
    for run in (large, little):
        assert len(run["seconds"]) == 4 and min(run["seconds"]) > 0 and run["batches"] > 0
    printed = capsys.readouterr().out
    assert printed.count("--shared-vocabulary-size") == 2 and "GFLOP/s before" in printed
    assert "5,394 steps in the minutes of the first size's 5,394" in printed
