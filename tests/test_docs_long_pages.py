"""The long docs pages (see `LONG_PAGES` in tests/test_docs.py), run like the others."""

import pytest

from tests.test_docs import DOCS, LONG_PAGES, run_page

pytestmark = pytest.mark.slow  # the long docs pages: `make test-all` only

PAGES = [DOCS / name for name in LONG_PAGES]


def test_long_pages_exist():
    assert all(page.exists() for page in PAGES), [str(p) for p in PAGES if not p.exists()]


@pytest.mark.parametrize("page", PAGES, ids=LONG_PAGES)
def test_docs_page_code_runs(page, tmp_path, monkeypatch):
    run_page(page, tmp_path, monkeypatch)
