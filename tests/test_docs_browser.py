"""The built site draws its math, diagrams and Bengali text in a real browser, offline.

The site is built with `mkdocs build` into a temporary folder and served on
127.0.0.1 by `http.server`; headless Chromium (Debian's `chromium`, installed
by `make examples-data`), driven through the DevTools protocol over
`--remote-debugging-pipe` (no extra Python package), opens every page that has
formulas, ```mermaid diagrams or Bengali text (about 30 pages, 15-20 s) and checks:

- MathJax typeset every formula: each `.arithmatex` element holds an
  `mjx-container`, there is no TeX error (`mjx-merror`) and no raw `\\(` or
  `\\[` is left in the page text (code blocks aside);
- mermaid drew every diagram: each `div.mermaid` holds an `<svg>` that is not
  mermaid's syntax-error picture (read through the closed shadow root where
  mkdocs-material puts it, with DOM.getDocument's `pierce`);
- on pages with Bengali text, the site's own Bengali font was loaded
  (`document.fonts`), and the local server served its file;
- nothing left the machine: Chromium resolves no host name but 127.0.0.1
  (`--host-resolver-rules`); every URL the pages or their workers requested
  (DevTools `Network` events, and the requests of Chromium's `--log-net-log`
  that have a web origin as initiator) is on 127.0.0.1; and the net log shows
  no TCP connection attempt to, and no UDP datagram sent to, an address off
  loopback. (Chromium's own background services, e.g. its component updater,
  still ask for their URLs; name resolution stops them, and the last check
  proves it.)

Skipped, with the reason, without /usr/bin/chromium, without mermaid (`make
docs-assets` unpacks it from npm into build/) or without the Bengali font
(Debian fonts-lohit-beng-bengali, `make examples-data`).
"""

import fcntl
import functools
import http.server
import ipaddress
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
VENDOR = "assets/vendor"
MATHJAX = f"{VENDOR}/mathjax/tex-mml-chtml.js"
MERMAID = f"{VENDOR}/mermaid/mermaid.min.js"
BENGALI_FONT = f"{VENDOR}/fonts/Lohit-Bengali.ttf"
BENGALI_FAMILY = "kerasseq Bengali"

BENGALI_CHAR = re.compile("[\u0980-\u09ff]")
# Under this many seconds a page must be drawn; all pages together take about 20 s.
PAGE_TIMEOUT = 20

CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--no-default-browser-check", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-extensions",
    "--disable-default-apps", "--disable-dev-shm-usage", "--mute-audio",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
    # Every host name but 127.0.0.1 fails to resolve: nothing can leave the machine.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
)

# What each page reports once loaded (run in the page; mermaid's SVG is checked
# separately, through the DOM domain, because it sits in a closed shadow root).
STATE_JS = r"""
(async () => {
  await document.fonts.ready;
  const article = document.querySelector("article") || document.body;
  const prose = article.cloneNode(true);
  prose.querySelectorAll("pre, code, script, style, mjx-assistive-mml").forEach((e) => e.remove());
  const math = [...document.querySelectorAll(".arithmatex")];
  const faces = [...document.fonts].filter((f) => f.family.replace(/"/g, "") === %(family)s);
  return {
    math: math.length,
    typeset: math.filter((e) => e.querySelector("mjx-container")).length,
    tex_errors: document.querySelectorAll("mjx-merror").length,
    raw: (prose.textContent.match(/\\[\[(]/g) || []).length,
    mermaid_pending: document.querySelectorAll("pre.mermaid").length,
    bengali: /[\u0980-\u09ff]/.test(article.textContent),
    font_status: faces.map((f) => f.status),
    font_check: document.fonts.check('16px "' + %(family)s + '"', "\u0985"),
  };
})()
""" % {"family": json.dumps(BENGALI_FAMILY)}


class _Handler(http.server.SimpleHTTPRequestHandler):
    requested = None  # set per server: list of paths

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.requested.append(urlsplit(self.path).path)
        super().do_GET()


@pytest.fixture
def server(tmp_path):
    """`(base_url, requested_paths, site_dir)` for a freshly built site."""
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[dev]')")
    pytest.importorskip("material", reason="mkdocs-material is not installed")
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} is absent: `make examples-data` (as root) installs Debian's chromium")
    site = tmp_path / "site"
    # --no-strict: test_docs.py checks the strict build; this one checks the browser.
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--no-strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, f"mkdocs build failed:\n{result.stdout}\n{result.stderr}"
    assert (site / MATHJAX).is_file(), (
        f"{MATHJAX} is not in the built site: django-static-mathjax (dev extra) is not installed"
    )
    if not (site / MERMAID).is_file():
        pytest.skip(f"{MERMAID} is not in the built site: run `make docs-assets` (mermaid from npm)")
    if not (site / BENGALI_FONT).is_file():
        pytest.skip(f"{BENGALI_FONT} is not in the built site: `make examples-data` installs "
                    "Debian's fonts-lohit-beng-bengali")
    requested = []
    handler = type("Handler", (_Handler,), {"requested": requested})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/", requested, site
    finally:
        httpd.shutdown()
        httpd.server_close()


def _above_9(fd):
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class DevTools:
    """Chromium driven through the DevTools protocol on `--remote-debugging-pipe`.

    Chromium reads commands from its fd 3 and writes answers and events to its
    fd 4, as JSON messages ended by a NUL byte.
    """

    def __init__(self, args, log_path):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # Chromium's ends go above fd 9 first, so that putting them on 3 and 4
        # cannot overwrite one with the other.
        to_chrome_r, from_chrome_w = (_above_9(fd) for fd in (to_chrome_r, from_chrome_w))
        self._log = open(log_path, "wb")
        # bash (dash takes no fd above 9) puts the two pipe ends on fds 3 and 4,
        # then becomes chromium.
        self.process = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}', str(CHROMIUM), *args],
            pass_fds=(to_chrome_r, from_chrome_w), stdin=subprocess.DEVNULL,
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._answers = {}
        self._answered = threading.Condition()
        self.events = queue.Queue()
        self.seen = []  # every event read by wait_event or drained at the end
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        buffer = b""
        while True:
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                break
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message:
                    with self._answered:
                        self._answers[message["id"]] = message
                        self._answered.notify_all()
                else:
                    self.events.put(message)
        with self._answered:
            self._answers[None] = {"error": {"message": "chromium closed the DevTools pipe"}}
            self._answered.notify_all()

    def send(self, method, params=None, session=None, timeout=30):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._answered:
            while self._next_id not in self._answers and None not in self._answers:
                if not self._answered.wait(max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"no answer to {method} within {timeout} s")
            answer = self._answers.pop(self._next_id, None) or self._answers[None]
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def wait_event(self, method, session, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {method} within {timeout} s")
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(event)
            if event.get("method") == method and event.get("sessionId") == session:
                return event

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_chrome)
        self._reader.join(timeout=5)
        os.close(self._from_chrome)
        self._log.close()


def _mermaid_diagrams(node):
    """For each `div.mermaid` under `node` (shadow roots included), the
    `aria-roledescription` of its first <svg> ("flowchart-v2", ..., "error"
    for mermaid's syntax-error picture), or None when it has no <svg>."""
    attributes = node.get("attributes", [])
    attributes = dict(zip(attributes[::2], attributes[1::2], strict=True))
    if node.get("localName") == "div" and "mermaid" in attributes.get("class", "").split():
        svgs = _elements(node, "svg")
        return [svgs[0].get("aria-roledescription", "svg") if svgs else None]
    return [kind for child in _children(node) for kind in _mermaid_diagrams(child)]


def _children(node):
    return node.get("children", []) + node.get("shadowRoots", [])


def _elements(node, name):
    """Attributes (a dict) of every `name` element under `node`, shadow roots included."""
    found = []
    for child in _children(node):
        if child.get("localName") == name:
            attributes = child.get("attributes", [])
            found.append(dict(zip(attributes[::2], attributes[1::2], strict=True)))
        found += _elements(child, name)
    return found


def _open(browser, session, url, ready, timeout=PAGE_TIMEOUT):
    """Navigate to `url`, then evaluate STATE_JS until `ready(state)` or `timeout`."""
    browser.send("Page.navigate", {"url": url}, session)
    browser.wait_event("Page.loadEventFired", session, timeout=timeout)
    deadline = time.monotonic() + timeout
    while True:
        answer = browser.send("Runtime.evaluate", {
            "expression": STATE_JS, "awaitPromise": True, "returnByValue": True,
        }, session)
        state = answer["result"]["value"]
        document = browser.send("DOM.getDocument", {"depth": -1, "pierce": True}, session)
        state["mermaid"] = _mermaid_diagrams(document["root"])
        if ready(state) or time.monotonic() > deadline:
            return state
        time.sleep(0.25)


def _pages(site):
    """`{page: (formulas, diagrams, has_bengali)}` for every page of the built
    site that has formulas, mermaid diagrams or Bengali text."""
    pages = {}
    for path in sorted(site.rglob("*.html")):
        if path.relative_to(site).parts[0] == "assets":
            continue
        html = path.read_text(errors="replace")
        expected = (html.count('class="arithmatex"'), html.count('class="mermaid"'),
                    bool(BENGALI_CHAR.search(html)))
        if any(expected):
            pages[path.relative_to(site).as_posix()] = expected
    return pages


def _drawn(state, expected):
    """What is not drawn yet on a page (empty when all is)."""
    formulas, diagrams, bengali = expected
    missing = []
    if state["typeset"] < formulas or state["raw"]:
        missing.append(f"MathJax typeset {state['typeset']} of {formulas} formulas, "
                       f"{state['raw']} raw \\( or \\[ left in the text")
    if state["tex_errors"]:
        missing.append(f"{state['tex_errors']} TeX errors")
    drawn = [kind for kind in state["mermaid"] if kind not in (None, "error")]
    if len(drawn) < diagrams or state["mermaid_pending"]:
        missing.append(f"mermaid drew {len(drawn)} of {diagrams} diagrams ({state['mermaid']})")
    if bengali and state["bengali"] and not ("loaded" in state["font_status"] and state["font_check"]):
        missing.append(f"the Bengali font {BENGALI_FAMILY!r} is not loaded ({state['font_status']})")
    return missing


def _read_net_log(path):
    """`(requests, leaks)` from Chromium's `--log-net-log` file.

    `requests` maps every URL the network stack was asked for to its initiator
    (the origin of the page or worker that asked, or "not an origin" for the
    browser's own background services); `leaks` lists every address not on
    loopback that a socket tried to reach: a TCP connection attempt, or a UDP
    socket that sent bytes (Chromium "connects" a UDP socket to a public address
    without sending anything to probe IPv6; that is not a leak).
    """
    text = path.read_text(errors="replace").rstrip()
    try:
        log = json.loads(text)
    except ValueError:  # not closed: chromium was killed
        log = json.loads(text.rstrip(",") + "]}")
    names = {number: name for name, number in log["constants"]["logEventTypes"].items()}
    requests, udp_address, udp_sent, leaks = {}, {}, set(), []
    for event in log["events"]:
        name, params, source = names.get(event["type"]), event.get("params") or {}, event["source"]["id"]
        if name == "URL_REQUEST_START_JOB" and "url" in params:
            requests.setdefault(params["url"], params.get("initiator", "not an origin"))
        elif name == "TCP_CONNECT_ATTEMPT" and "address" in params and not _is_loopback(params["address"]):
            leaks.append(f"TCP {params['address']}")
        elif name == "UDP_CONNECT" and "address" in params:
            udp_address[source] = params["address"]
        elif name == "UDP_BYTES_SENT":
            udp_sent.add(source)
    leaks += [f"UDP {udp_address[source]}" for source in udp_sent
              if source in udp_address and not _is_loopback(udp_address[source])]
    return requests, leaks


def _is_loopback(address):
    """True for "127.0.0.1:8000", "[::1]:443" and the like."""
    host = address.rsplit(":", 1)[0].strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_local(url):
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about", "chrome", "devtools"):
        return True
    return parts.hostname == "localhost" or _is_loopback(f"{parts.hostname}:0")


def browse(base, pages, tmp_path):
    """Open each `(page, ready)` of `pages` in headless Chromium.

    Returns `(states, page_urls, net_requests, leaks)`: STATE_JS's report for
    each page, the URLs the DevTools `Network` domain saw the pages request,
    and what `_read_net_log` found.
    """
    net_log = tmp_path / "net-log.json"
    browser = DevTools([
        *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
        f"--log-net-log={net_log}", "--remote-debugging-pipe", "about:blank",
    ], tmp_path / "chromium.log")
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "DOM", "Runtime"):
            browser.send(f"{domain}.enable", session=session)
        states = [_open(browser, session, base + page, ready) for page, ready in pages]
        time.sleep(0.5)  # let late requests (fonts, workers) show up in the logs
        while not browser.events.empty():
            browser.seen.append(browser.events.get())
    finally:
        browser.close()
    page_urls = {event["params"]["request"]["url"] for event in browser.seen
                 if event.get("method") == "Network.requestWillBeSent"}
    return (states, page_urls, *_read_net_log(net_log))


def test_site_renders_math_diagrams_and_bengali_offline(server, tmp_path):
    base, requested, site = server
    pages = _pages(site)
    for what, index in (("formulas", 0), ("mermaid diagrams", 1), ("Bengali text", 2)):
        assert any(expected[index] for expected in pages.values()), f"no page of the site has {what}"

    states, page_urls, net_requests, leaks = browse(base, [
        (page, lambda state, expected=expected: not _drawn(state, expected))
        for page, expected in pages.items()
    ], tmp_path)

    assert any(state["bengali"] for state in states), "no page shows Bengali text"
    problems = [f"{page}: {problem}" for (page, expected), state in zip(pages.items(), states, strict=True)
                for problem in _drawn(state, expected)]
    chromium_log = (tmp_path / "chromium.log").read_text(errors="replace")[-2000:] if problems else ""
    assert not problems, "\n".join(problems) + "\n" + chromium_log
    for asset in (MATHJAX, MERMAID, BENGALI_FONT):
        assert "/" + asset in requested, f"the local server never served {asset}"

    # Nothing the pages (or their workers) asked for is off the machine ...
    assert any(url.endswith(MERMAID) for url in page_urls), "the DevTools log saw no request"
    assert any(url.endswith(BENGALI_FONT) for url in net_requests), "the net log saw no request"
    remote = sorted(url for url in page_urls if not _is_local(url))
    remote += sorted(f"{url} (from {initiator})" for url, initiator in net_requests.items()
                     if initiator != "not an origin" and not _is_local(url))
    assert not remote, "the pages requested:\n" + "\n".join(remote)
    # ... and no socket of the browser, its own background services included
    # (which --host-resolver-rules stops at name resolution), reached out.
    assert not leaks, "connections left the machine: " + ", ".join(leaks)
