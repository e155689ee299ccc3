"""benchmarks/vocabulary_step_cost.py: a smoke run on a slice of the Bibles."""

import importlib.util
import os
import re

import numpy as np
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
        assert len(run["timed_pieces"]) == 4 and min(run["timed_pieces"]) > 0
    printed = capsys.readouterr().out
    assert printed.count("--shared-vocabulary-size") == 2 and "GFLOP/s before" in printed
    # the second size's steps: the first's 5,394 at the ratio of the mean step times
    steps = int(re.findall(r"([\d,]+) steps at the step time", printed)[1].replace(",", ""))
    expected = 5394 * np.mean(large["seconds"]) / np.mean(little["seconds"])
    assert abs(steps - expected) <= 0.5
