# Entry points, each self-installing on a fresh machine with Python 3.11:
#   make demo     - create .venv, install kerasseq, train a small G2P model, translate, save
#   make test     - create .venv, install kerasseq[dev], run the behaviour tests
#                   (pytest -m "not slow": every component against its reference)
#   make test-all - the same install, then every test: also the `slow` ones (docs
#                   pages, examples, multi-worker processes, browser, notebooks);
#                   what CI (.ci/run) runs
# CONSTRAINTS=FILE installs with `pip -c FILE`: .ci/run passes .ci/floor.txt, the
# floor of every range in setup.cfg's install_requires, so CI tests the floor.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.kerasseq-installed
PYTEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder
CONSTRAINTS ?=

.PHONY: install demo test test-all lint clean

$(STAMP): setup.cfg pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]" $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/kerasseq demo --output-dir runs/demo

test: install
	$(PYTEST) -m "not slow" tests

test-all: install docs-assets
	$(PYTEST) tests

lint: install
	$(BIN)/ruff check kerasseq kerasseq_cli tests examples benchmarks

clean:
	rm -rf $(VENV) runs build *.egg-info

# Optional system data for the examples (Debian/Ubuntu, needs root): the
# German-English sentence pairs of examples/german_to_english_ding.py, the
# SWORD Bibles of examples/spanish_to_english_bible.py (Reina-Valera 1909 and
# the World English Bible, read with mod2imp from libsword-utils) and a Bengali
# font for the attention heatmaps of examples/english_to_bengali_numbers.py
# (the docs site serves the same font to its readers); chromium, the headless
# browser of tests/test_docs_browser.py; graphviz, which keras.utils.plot_model
# calls through pydot (the `plot` extra).
# --no-install-recommends: without it libsword-utils brings about 200 packages.
# Not a dependency of `make test` or `make test-all`: without them the tests
# that need them are skipped (with the reason) and Bengali labels are drawn
# with a warning. .ci/run calls it.
EXAMPLES_PACKAGES := dict-freedict-deu-eng fonts-lohit-beng-bengali libsword-utils sword-text-sparv sword-text-web chromium graphviz
.PHONY: examples-data
examples-data:
	@if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && apt-get install -y -qq --no-install-recommends $(EXAMPLES_PACKAGES) >/dev/null) \
	    || echo "examples-data: apt-get could not install $(EXAMPLES_PACKAGES); the examples that need them will be skipped"; \
	else \
	  echo "examples-data: needs root and apt-get (Debian/Ubuntu); the examples that need it will be skipped"; \
	fi

# Browser assets of the docs site that no PyPI package ships: mermaid, which
# draws the ```mermaid diagrams (docs/hooks/offline_assets.py copies it into the
# site, so no page fetches it from a CDN). `npm pack` fetches the package's
# tarball from the npm registry (checked against the registry's sha512; no
# dependencies, no node_modules) and only dist/mermaid.min.js (3.5 MB) is kept,
# under build/ (ignored by git). Best effort: without npm or the registry the
# site is built without it and tests/test_docs_browser.py is skipped, saying so.
# `make test-all` runs it; the stamp names the version, so a new one is fetched.
MERMAID_VERSION := 11.17.2
DOCS_ASSETS := build/docs-assets
MERMAID_STAMP := $(DOCS_ASSETS)/mermaid/.version-$(MERMAID_VERSION)
.PHONY: docs-assets
docs-assets: $(MERMAID_STAMP)
$(MERMAID_STAMP):
	@tmp=$$(mktemp -d); \
	if command -v npm >/dev/null 2>&1 \
	  && (cd "$$tmp" && timeout 300 npm pack --silent --fetch-retries=1 mermaid@$(MERMAID_VERSION) >/dev/null) \
	  && tar -xzf "$$tmp/mermaid-$(MERMAID_VERSION).tgz" -C "$$tmp" package/dist/mermaid.min.js; then \
	  rm -rf $(@D) && mkdir -p $(@D) && mv "$$tmp/package/dist/mermaid.min.js" $(@D)/ && touch $@ \
	    && echo "docs-assets: mermaid $(MERMAID_VERSION) in $(@D)"; \
	else \
	  echo "docs-assets: npm could not fetch mermaid@$(MERMAID_VERSION); the docs draw no diagram offline and tests/test_docs_browser.py will be skipped"; \
	fi; \
	rm -rf "$$tmp"
