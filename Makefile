# Two entry points, both self-installing on a fresh machine with Python 3.11:
#   make demo   - create .venv, install kerasseq, train a small G2P model, translate, save
#   make test   - create .venv, install kerasseq[dev], run the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.kerasseq-installed
PYTEST_WORKERS ?= 2

.PHONY: install demo test lint clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/kerasseq demo --output-dir runs/demo

test: install
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile tests

lint: install
	$(BIN)/ruff check kerasseq tests examples benchmarks

clean:
	rm -rf $(VENV) runs build *.egg-info

# Optional data for examples/german_to_english_ding.py (Debian/Ubuntu, needs root).
# Not a dependency of `make test`: the German example's smoke test skips without it.
.PHONY: examples-data
examples-data:
	apt-get install -y dict-freedict-deu-eng || echo "dict-freedict-deu-eng not available; the German example will be skipped"
