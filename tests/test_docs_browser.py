"""The built site draws its math, diagrams and Bengali text in a real browser, offline.

The site is built with `mkdocs build` into a temporary folder and served on
127.0.0.1 by `http.server`; headless Chromium (Debian's `chromium`, installed
by `make examples-data`), driven through the DevTools protocol over
`--remote-debugging-pipe` (no extra Python package), opens every page of the
site in a window 1280 px wide (about 40 pages, 40-80 s) and checks:

- MathJax typeset every formula: each `.arithmatex` element holds an
  `mjx-container`, there is no TeX error (`mjx-merror`) and no raw `\\(` or
  `\\[` is left in the page text (code blocks aside);
- no raw TeX is left in the text a reader sees once MathJax is done (code
  blocks and typeset math aside): no `_{` or `^{`, no command such as `\\frac`
  or `\\tanh`, no one-letter subscript such as `h_t` (write `$h_t$`);
- mermaid drew every diagram: each `div.mermaid` holds an `<svg>` that is not
  mermaid's syntax-error picture (read through the closed shadow root where
  mkdocs-material puts it, with DOM.getDocument's `pierce`);
- every diagram can be read: the text of each of its labels is drawn at least
  10 px high (its font size times the SVG's scale on the screen), and each
  label of the page's mermaid source is drawn whole (a label that mermaid cuts
  short, e.g. at a `<` it takes for an HTML tag, is reported);
- the `keras.utils.plot_model` pictures (`*_graph.png`) are shown at a scale
  that draws their text at least 10 px high;
- every table fits the text column: none is wider than the box that would
  scroll it sideways, so no column (the test scores sit in the last ones)
  is hidden (docs/stylesheets/tables.css);
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
import html
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

pytestmark = pytest.mark.slow  # the docs site in a browser: `make test-all` only

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
VENDOR = "assets/vendor"
MATHJAX = f"{VENDOR}/mathjax/tex-mml-chtml.js"
MERMAID = f"{VENDOR}/mermaid/mermaid.min.js"
BENGALI_FONT = f"{VENDOR}/fonts/Lohit-Bengali.ttf"
BENGALI_FAMILY = "kerasseq Bengali"

BENGALI_CHAR = re.compile("[\u0980-\u09ff]")
# Every wait of this test polls for what it waits for and returns as soon as it
# is there (all pages together take 40-80 s on an idle machine); the deadlines
# are only there so that a page that never draws ends the test. They are
# minutes, not seconds: on a loaded machine (the suite's other pytest-xdist
# worker, other jobs) a page load or a DevTools answer can take longer than
# the 20-30 s they were, and the test failed by load with a TimeoutError
# although nothing was wrong with the site (issue 44).
PAGE_TIMEOUT = 300  # seconds for a page to load, then to be drawn
COMMAND_TIMEOUT = 300  # seconds for Chromium to answer one DevTools command
BUILD_TIMEOUT = 1200  # seconds for `mkdocs build` (a few seconds idle)
# The window the pages are read in: a laptop screen, where mkdocs-material shows
# the navigation and the table of contents beside a text column about 690 px wide.
WINDOW = {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}
# The smallest text, in CSS px on the screen, that a diagram or a picture of a
# model may draw: mermaid writes 16 px, so a diagram shrunk below 5/8 fails.
MIN_TEXT_PX = 10
# keras.utils.plot_model writes shapes in 14-point type and docs/plot_models.py
# draws at dpi=72: 14 px of the PNG, to be shown at a scale of at least 10/14.
PLOT_MODEL_TEXT_PX = 14

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
  // The text a reader sees: typeset math aside (MathJax's glyphs are not TeX).
  const text = prose.cloneNode(true);
  text.querySelectorAll("mjx-container").forEach((e) => e.remove());
  const tex = [...text.textContent.matchAll(%(tex)s)].map((m) =>
    text.textContent.slice(Math.max(0, m.index - 25), m.index + m[0].length + 15).replace(/\s+/g, " "));
  const graphs = [...article.querySelectorAll("img")].filter((img) => /_graph\.png$/.test(img.src));
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
    tex: tex,
    graphs: graphs.map((img) => ({
      src: img.getAttribute("src"),
      scale: img.naturalWidth ? img.getBoundingClientRect().width / img.naturalWidth : 0,
    })),
    wide_tables: [...article.querySelectorAll("table")].map((table) => {
      const box = table.closest(".md-typeset__scrollwrap") || table.parentElement;
      const right = box.getBoundingClientRect().right;
      return {
        headers: [...table.querySelectorAll("th")].map((th) => th.textContent.trim()),
        hidden: [...table.querySelectorAll("th")].filter((th) =>
          th.getBoundingClientRect().right > right + 1).map((th) => th.textContent.trim()),
        width: Math.round(table.scrollWidth), room: Math.round(box.clientWidth),
      };
    }).filter((table) => table.width > table.room + 1),
  };
})()
"""


# Raw TeX in a page's text (JavaScript regex): a `_{` or `^{`, a command of two
# letters or more (`\frac`, `\tanh`, `\mathbf`, ...), or a one-letter symbol
# with a subscript or superscript written the TeX way (`h_t`, `s_0`, `e^2.85`,
# `e^(-2.3)`; names in prose such as `d_model` or `ctx_t` are not matched).
RAW_TEX = r"/[_^]\{|\\[A-Za-z]{2,}|\b[A-Za-z](?:_[A-Za-z0-9]\b|\^[A-Za-z0-9(\u2212-])/g"
STATE_JS %= {"family": json.dumps(BENGALI_FAMILY), "tex": RAW_TEX}

# Run on the closed shadow root of one drawn diagram (`this`): each label of its
# <svg> (an HTML label in a <foreignObject>, or an SVG <text>) with its text and
# the height of its text on the screen: the largest font size of the label's
# text (its subscripts are smaller) times the scale from the SVG to the screen.
LABELS_JS = r"""
function () {
  const svg = this.querySelector("svg");
  if (!svg) return [];
  const labels = [];
  for (const label of svg.querySelectorAll("foreignObject, text")) {
    const ctm = label.getScreenCTM();
    if (!label.textContent.trim() || !ctm || !label.getBoundingClientRect().width) continue;
    let size = 0;
    const walker = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.textContent.trim()) {
        size = Math.max(size, parseFloat(getComputedStyle(node.parentElement).fontSize));
      }
    }
    labels.push({text: label.textContent, px: size * Math.hypot(ctm.a, ctm.b)});
  }
  return labels;
}
"""


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
        cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT,
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

    def send(self, method, params=None, session=None, timeout=COMMAND_TIMEOUT):
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

    def wait_event(self, method, session, timeout=PAGE_TIMEOUT):
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
        # Chromium writes the end of its net log as it closes: it gets minutes
        # on a loaded machine before it is killed (a killed one's log is read
        # anyway, by `_read_net_log`, but may lack its last events).
        try:
            self.send("Browser.close", timeout=COMMAND_TIMEOUT)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_chrome)
        self._reader.join(timeout=5)
        os.close(self._from_chrome)
        self._log.close()


def _mermaid_nodes(node):
    """Every `div.mermaid` node under `node` (shadow roots included), in page order."""
    attributes = node.get("attributes", [])
    attributes = dict(zip(attributes[::2], attributes[1::2], strict=True))
    if node.get("localName") == "div" and "mermaid" in attributes.get("class", "").split():
        return [node]
    return [found for child in _children(node) for found in _mermaid_nodes(child)]


def _mermaid_diagrams(node):
    """For each `div.mermaid` under `node` (shadow roots included), the
    `aria-roledescription` of its first <svg> ("flowchart-v2", ..., "error"
    for mermaid's syntax-error picture), or None when it has no <svg>."""
    kinds = []
    for diagram in _mermaid_nodes(node):
        svgs = _elements(diagram, "svg")
        kinds.append(svgs[0].get("aria-roledescription", "svg") if svgs else None)
    return kinds


def _diagram_labels(browser, session, node):
    """For each `div.mermaid` under `node`, LABELS_JS's list of its labels
    (`{"text", "px"}`), run in the diagram's closed shadow root."""
    labels = []
    for diagram in _mermaid_nodes(node):
        if not diagram.get("shadowRoots"):
            labels.append([])
            continue
        shadow = browser.send("DOM.resolveNode", {"nodeId": diagram["shadowRoots"][0]["nodeId"]}, session)
        answer = browser.send("Runtime.callFunctionOn", {
            "objectId": shadow["object"]["objectId"], "functionDeclaration": LABELS_JS,
            "returnByValue": True,
        }, session)
        labels.append(answer["result"]["value"])
    return labels


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
    """Navigate to `url`, then evaluate STATE_JS until `ready(state)`, until the
    page shows an error that no wait mends (a TeX error, mermaid's error
    picture), or for `timeout` seconds: a healthy page returns as soon as it
    is drawn, a loaded machine only makes the wait longer."""
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
        final = state["tex_errors"] or "error" in state["mermaid"]
        if ready(state) or final or time.monotonic() > deadline:
            state["labels"] = _diagram_labels(browser, session, document["root"])
            return state
        time.sleep(0.25)


def _pages(site):
    """`{page: (formulas, diagrams, has_bengali, mermaid_sources)}` for every
    page of the built site."""
    pages = {}
    for path in sorted(site.rglob("*.html")):
        if path.relative_to(site).parts[0] == "assets":
            continue
        text = path.read_text(errors="replace")
        # mkdocs-material draws the text of each <pre class="mermaid">.
        sources = [html.unescape(re.sub(r"<[^>]*>", "", source)) for source in
                   re.findall(r'<pre class="mermaid">(.*?)</pre>', text, re.DOTALL)]
        pages[path.relative_to(site).as_posix()] = (
            text.count('class="arithmatex"'), text.count('class="mermaid"'),
            bool(BENGALI_CHAR.search(text)), sources)
    return pages


def _drawn(state, expected):
    """What is not drawn yet on a page (empty when all is)."""
    formulas, diagrams, bengali, _ = expected
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


# Inline HTML that mermaid draws as formatting, not as text, in a label.
_LABEL_TAGS = re.compile(r"</?(?:br|sub|sup|b|i|em|strong|small|span)\b[^>]*>", re.IGNORECASE)


def _label_text(label):
    """The text a reader should see in a mermaid label: its HTML tags dropped,
    its entities (HTML's `&lt;` and mermaid's `#lt;` or `#60;`) decoded, and
    without whitespace (mermaid breaks and wraps lines its own way)."""
    text = re.sub(r"#(\d+|[A-Za-z]+);", lambda m: html.unescape(
        f"&#{m[1]};" if m[1].isdigit() else f"&{m[1]};"), _LABEL_TAGS.sub("", label))
    return re.sub(r"\s+", "", html.unescape(text))


def _source_labels(source):
    """The labels of one mermaid diagram's source: the node, edge and subgraph
    labels of a flowchart (quoted, unquoted in brackets, or between `|`s), the
    participants, messages and loop or note texts of a sequence diagram."""
    lines = [line.strip() for line in source.splitlines()
             if line.strip() and not line.strip().startswith("%%")]
    labels = []
    if lines[0].split()[0] == "sequenceDiagram":
        for line in lines[1:]:
            found = (re.fullmatch(r"(?:participant|actor)\s+\S+\s+as\s+(.+)", line)
                     or re.fullmatch(r"(?:loop|alt|else|opt|par|and|critical|break|rect)\s+(.+)", line)
                     or re.fullmatch(r"[^:]*?(?:-->>|->>|-->|->|--x|-x|--\)|-\))[^:]*:(.+)", line)
                     or re.fullmatch(r"[Nn]ote\s[^:]*:(.+)", line))
            if found:
                labels.append(found[1])
        return labels
    for line in lines[1:]:
        if re.match(r"(?:classDef|class|style|linkStyle|click|direction)\b", line):
            continue
        labels += re.findall(r'"([^"]*)"', line)
        unquoted = re.sub(r'"[^"]*"', '""', line)
        labels += re.findall(r"\w[\[({>]+([^\[\](){}|\"<>]+)[\])}]+", unquoted)
        labels += re.findall(r"\|([^|\"]+)\|", unquoted)
    return labels


def _unreadable(state, expected):
    """What a reader cannot read on a drawn page: raw TeX in its text, diagram
    labels too small or cut short, model pictures shrunk too far."""
    sources = expected[3]
    problems = []
    if state["tex"]:
        problems.append(f"{len(state['tex'])} raw TeX left in the text: "
                        + "; ".join(repr(snippet) for snippet in state["tex"]))
    for number, (source, labels) in enumerate(zip(sources, state["labels"], strict=False), 1):
        name = f"diagram {number} ({source.strip().splitlines()[0]})"
        small = sorted((label["px"], label["text"].strip()) for label in labels
                       if label["px"] < MIN_TEXT_PX)
        if small:
            problems.append(f"{name}: {len(small)} of {len(labels)} labels drawn under {MIN_TEXT_PX} px "
                            f"high (smallest {small[0][0]:.1f} px: {small[0][1]!r})")
        # Line by line: a sequence diagram draws each line of a label as its own <text>.
        drawn = [_label_text(label["text"]) for label in labels]
        cut = [line for label in _source_labels(source) for line in re.split(r"<br\s*/?>", label)
               if _label_text(line) and not any(_label_text(line) in text for text in drawn)]
        if cut:
            problems.append(f"{name}: {', '.join(map(repr, cut))} not drawn whole; the labels drawn are "
                            + ", ".join(repr(label["text"]) for label in labels))
    for table in state["wide_tables"]:
        problems.append(f"the table with the columns {table['headers']} is {table['width']} px wide "
                        f"in {table['room']} px: {table['hidden']} are hidden behind a scroll")
    for graph in state["graphs"]:
        if graph["scale"] * PLOT_MODEL_TEXT_PX < MIN_TEXT_PX:
            problems.append(f"{graph['src']} is shown at {graph['scale']:.2f} of its size: its "
                            f"{PLOT_MODEL_TEXT_PX} px text is drawn "
                            f"{graph['scale'] * PLOT_MODEL_TEXT_PX:.1f} px high")
    return problems


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
        browser.send("Emulation.setDeviceMetricsOverride", WINDOW, session)
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
                for problem in _drawn(state, expected) or _unreadable(state, expected)]
    assert sum(map(len, (label for state in states for label in state["labels"]))) > 0, (
        "no label of any diagram was measured")
    assert any(state["graphs"] for state in states), "no page shows a plot_model picture (*_graph.png)"
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


def test_the_readability_checks_catch_raw_tex_and_cut_labels():
    """Without a browser: RAW_TEX (a regex Python reads the same way) and the
    label comparison catch what the docs review found."""
    raw_tex = re.compile(RAW_TEX.strip("/g"))
    for text in ("previous state s_{t-1}", "s_0 = tanh(W m + b)", "e^2.85 / (e^2.85 + 1)",
                 "e^(\u22122.3)", "v^T tanh", "\\frac{a}{b}", "\\mathbf{x}", "x^{2}"):
        assert raw_tex.search(text), text
    for text in ("d_model and ctx_t", "source_ids", "2 * units", "w \u00b7 h\u2083", "a \u2264 b"):
        assert not raw_tex.search(text), text

    # index.md's first diagram, as it was: mermaid read `<t, x)` as an HTML tag.
    source = ('flowchart TB\n    dec --> out["Dense \u2192 softmax<br/>P(y<sub>t</sub> | y<sub><t</sub>, x)"]\n'
              '    dec -- "s<sub>t-1</sub> (query)" --> att\n')
    assert _source_labels(source) == ["Dense \u2192 softmax<br/>P(y<sub>t</sub> | y<sub><t</sub>, x)",
                                      "s<sub>t-1</sub> (query)"]
    state = {"tex": [], "graphs": [], "wide_tables": [], "labels": [[
        {"text": "Dense \u2192 softmaxP(yt | y", "px": 13.6}, {"text": "st-1 (query)", "px": 6.2}]]}
    small, cut = _unreadable(state, (0, 1, False, [source]))
    assert "1 of 2 labels drawn under 10 px" in small and "6.2 px: 'st-1 (query)'" in small
    assert "not drawn whole" in cut and "'P(y<sub>t</sub> | y<sub><t</sub>, x)'" in cut
    # Written `&lt;`, it is drawn whole: the check compares decoded text.
    fixed = source.replace("<sub><t</sub>", "<sub>&lt;t</sub>")
    state["labels"][0][0]["text"] = "Dense \u2192 softmaxP(yt | y<t, x)"
    state["labels"][0][1]["px"] = 12.0
    assert _unreadable(state, (0, 1, False, [fixed])) == []

    sequence = "sequenceDiagram\n    participant S as search<br/>(greedy)\n    S->>M: encode(ids)\n"
    assert _source_labels(sequence) == ["search<br/>(greedy)", " encode(ids)"]
    graph = {"tex": [], "labels": [], "wide_tables": [],
             "graphs": [{"src": "images/a_graph.png", "scale": 0.34}]}
    assert _unreadable(graph, (0, 0, False, [])) == [
        "images/a_graph.png is shown at 0.34 of its size: its 14 px text is drawn 4.8 px high"]
    # results.md's test scores as the theme alone drew them at 1280 px.
    table = {"tex": [], "labels": [], "graphs": [], "wide_tables": [{
        "headers": ["model", "test BLEU beam 4"], "hidden": ["test BLEU beam 4"],
        "width": 1128, "room": 720}]}
    assert _unreadable(table, (0, 0, False, [])) == [
        "the table with the columns ['model', 'test BLEU beam 4'] is 1128 px wide in 720 px: "
        "['test BLEU beam 4'] are hidden behind a scroll"]
