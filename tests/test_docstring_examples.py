"""The `>>>` examples in kerasseq's docstrings run and print what they say.

Every module of the package is imported and its docstrings are run with
`doctest` (ELLIPSIS, NORMALIZE_WHITESPACE), in a temporary working directory
(an example may save a file). As in the Keras docstrings, the examples assume
`import numpy as np`, `import keras` and `from keras import ops`; anything else
they import themselves. An example that needs a trained model is written as a
plain indented block, not as `>>>` lines.
"""

import doctest
import importlib
import io
import pkgutil

import keras
import numpy as np
import pytest
from keras import ops

import kerasseq


def _modules():
    for info in pkgutil.walk_packages(kerasseq.__path__, "kerasseq."):
        if not info.name.endswith("__main__"):
            yield importlib.import_module(info.name)


@pytest.mark.slow
def test_every_docstring_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    report = io.StringIO()
    examples = 0
    for module in _modules():
        for test in finder.find(module, module.__name__,
                                extraglobs={"np": np, "keras": keras, "ops": ops}):
            if test.examples:
                examples += len(test.examples)
                runner.run(test, out=report.write)
    assert examples > 100  # the walk found the package's examples
    assert runner.summarize(verbose=False).failed == 0, report.getvalue()
