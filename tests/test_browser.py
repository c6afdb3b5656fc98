"""The built book in a real browser: headless Chromium (Playwright) on the pages served locally.

Offline: every request that leaves the local server is aborted and counts as a failure, so the
pages must load everything (MathJax included) from the book itself. Needs the ``playwright``
package and a Chromium (``/usr/bin/chromium``, Debian's ``chromium``; or ``FEATLIB_CHROMIUM``);
without them the tests skip, or fail where ``CI`` is set.

On every page, at 1280 px, as a reader sees it: no table, figure, code block or equation is wider
than the content column (a display equation or a code block may scroll inside its own box); every
figure is shown at (nearly) the size it was drawn for, so its text (at least
``featbook.style.MIN_TEXT_PT``, below which no figure code sets a font: tests/test_presentation.py) measures at least 11 px; every figure has a caption; and the text
shows no leaked code or template leftovers (:mod:`featbook.leaks`). At 1280 px and 390 px: no
visible code cell records, validates, preflights or assembles prose (``MACHINERY``), no visible
output shows the preflight's estimate (a ``remove-input`` cell hides its code, not its output),
and the page never scrolls sideways. Full-page screenshots of every page are written to ``_build/screenshots``
(``<page>.png`` at 1280 px, ``<page>-390.png`` at 390 px).
"""
import functools
import http.server
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from featbook import style
from featbook.leaks import PREFLIGHT, SKIPPED, scan_text
from featbook.notebooks import REPO_ROOT
from test_notebooks import CHAPTERS, MIN_IMAGES

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright
except ImportError:  # chromium_executable skips (or fails in CI) with the reason
    PlaywrightTimeout, sync_playwright = TimeoutError, None

pytestmark = [pytest.mark.browser, pytest.mark.notebook]

CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMEOUT_MS = 30_000


def toc_pages():
    """The root page and every chapter of ``_toc.yml``, as paths of the HTML directory."""
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc.get("parts", []) for c in part["chapters"]]
    return [f"{f}.html" for f in files]


def unavailable(reason):
    """Skip, or fail where ``CI`` is set: CI must run the browser tests."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, so the browser tests must run", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium_executable():
    """Chromium's path, checked before anything slow (the notebooks, the book) runs."""
    if sync_playwright is None:
        unavailable("the playwright package is not installed (pip install playwright)")
    executable = os.environ.get("FEATLIB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.access(executable, os.X_OK):
        unavailable(f"no Chromium at {executable} (apt-get install chromium, or set FEATLIB_CHROMIUM)")
    return executable


@pytest.fixture(scope="module")
def site(chromium_executable, built_book):
    """The built book served over HTTP on 127.0.0.1 (a free port); its base URL."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(built_book)))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="module")
def browser(chromium_executable, site):
    """Headless Chromium for this module only (Playwright's event loop is gone when papermill runs)."""
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_executable, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Visit:
    """A fresh page that records what went wrong while it loaded."""

    def __init__(self, browser, base):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.context.set_default_timeout(TIMEOUT_MS)
        self.page = self.context.new_page()
        self.problems = []
        origin = urlsplit(base).netloc
        self.page.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).netloc == origin
                        or route.request.url.startswith(("data:", "blob:")) else route.abort("internetdisconnected"))
        self.page.on("console", lambda m: m.type == "error" and self.problems.append(f"console error: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"request failed: {r.url} ({r.failure})"))
        self.page.on("response", lambda r: r.status >= 400 and self.problems.append(f"HTTP {r.status}: {r.url}"))

    def open(self, url):
        response = self.page.goto(url, wait_until="load")
        assert response is not None and response.status == 200, f"{url}: {response and response.status}"
        self.page.wait_for_load_state("networkidle")
        return self.page

    def close(self):
        self.context.close()


@pytest.fixture
def visit(browser, site):
    visits = []

    def open_page(path):
        v = Visit(browser, site)
        visits.append(v)
        return v, v.open(site + path)

    yield open_page
    for v in visits:
        v.close()


def images(page):
    """``(src, naturalWidth)`` of every image, once each has finished loading."""
    page.wait_for_function("Array.from(document.images).every(img => img.complete)")
    return page.eval_on_selector_all("img", "imgs => imgs.map(img => [img.currentSrc || img.src, img.naturalWidth])")


def wait_for_mathjax(visit):
    """Wait until MathJax, if the page loads it, has typeset; the number of ``mjx-container``."""
    page = visit.page
    if page.evaluate("() => !document.querySelector('script[src*=\"mathjax\"]')"):
        return 0
    try:
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        started = True
    except PlaywrightTimeout:
        started = False
    if not started:
        pytest.fail(f"{page.url}: MathJax did not start\n" + "\n".join(visit.problems), pytrace=False)
    page.evaluate("() => MathJax.startup.promise")
    return page.locator("mjx-container").count()


@pytest.mark.parametrize("path", toc_pages())
def test_page_loads_offline_with_images_and_equations(visit, path):
    v, page = visit(path)
    rendered = wait_for_mathjax(v)
    imgs = images(page)
    assert not [src for src, width in imgs if width == 0], f"{path}: images that did not load"
    stem = Path(path).stem
    if stem in CHAPTERS:
        assert len(imgs) >= MIN_IMAGES.get(stem, 3), f"{path}: {len(imgs)} images"
        launch = page.locator('a[href^="https://colab.research.google.com/github/"]')
        assert launch.count() >= 1, f"{path}: no 'Open in Colab' launch link"
        assert f"notebooks/{stem}.ipynb" in launch.first.get_attribute("href")
    math = page.locator(".math").count()
    if math:  # Sphinx's math elements: every one typeset by MathJax, no raw TeX left
        assert rendered >= math, f"{path}: {rendered} typeset of {math} equations"
        raw = page.eval_on_selector_all(".math", "els => els.filter(e => !e.querySelector('mjx-container')).length")
        assert raw == 0, f"{path}: {raw} equations left as raw TeX"
    assert not v.problems, f"{path}:\n" + "\n".join(v.problems)


def test_chapter_01_has_typeset_equations(visit):
    v, page = visit("notebooks/01_erm_feature_learning.html")
    assert wait_for_mathjax(v) > 0
    assert not v.problems, "\n".join(v.problems)


def test_front_page_redirects_to_the_introduction_and_looks_right(visit, repo_root):
    v, page = visit("index.html")
    page.wait_for_url("**/book/intro.html")
    page.wait_for_load_state("networkidle")
    assert "The FeAT book" in page.locator("h1").first.inner_text()
    assert not [src for src, width in images(page) if width == 0]
    wait_for_mathjax(v)
    shots = repo_root / "_build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    # A viewport as tall as the page: the theme's sticky sidebars (100vh high) then show whole.
    page.set_viewport_size({"width": 1280, "height": page.evaluate("document.documentElement.scrollHeight")})
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    page.screenshot(path=str(shots / "front.png"), full_page=True)
    assert (shots / "front.png").stat().st_size > 10_000
    assert not v.problems, "\n".join(v.problems)


def cards_on_a_phone(page, cells, first_row):
    """Checks ``cells`` are table cells at 1280 px and blocks at 390 px; returns the ``::before``
    labels of ``first_row``'s cells and the right edge of the widest cell at 390 px."""
    assert page.eval_on_selector(cells, "td => getComputedStyle(td).display") == "table-cell"
    page.set_viewport_size({"width": 390, "height": 844})
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    assert set(page.eval_on_selector_all(cells, "tds => tds.map(td => getComputedStyle(td).display)")) == {"block"}
    labels = page.eval_on_selector_all(first_row, "tds => tds.map(td => getComputedStyle(td, '::before').content)")
    widest = page.eval_on_selector_all(cells, "tds => Math.max(...tds.map(td => td.getBoundingClientRect().right))")
    return labels, widest


def test_the_claims_table_is_a_table_at_1280_px_and_a_card_per_claim_at_390_px(visit):
    """The introduction's claims table (featbook.claims): five columns at 1280 px; on a phone each
    claim a card, its cells one under the other, each named by its column, none wider than the
    screen (book/featbook.css)."""
    from featbook import claims

    v, page = visit("book/intro.html")
    cells = "div.claims-table td"
    assert page.locator("div.claims-table tr").count() == len(claims.ROWS) + 1  # the header row too
    labels, widest = cards_on_a_phone(page, cells, "div.claims-table tr:first-of-type td, "
                                                   "div.claims-table tbody tr:first-child td")
    assert '"Shown here at: "' in labels and '"Does ours agree? "' in labels
    assert widest <= 390, f"a claims-table cell reaches {widest} px on a 390 px screen"
    assert not page.locator("div.claims-table thead").is_visible()


def test_the_chapters_table_is_a_table_at_1280_px_and_a_card_per_chapter_at_390_px(visit):
    """The introduction's "How to read this book": a chapter per row with its number at 1280 px; on a
    phone each chapter a card whose cells are named by their columns, none wider than the screen."""
    v, page = visit("book/intro.html")
    cells = "div.chapters-table td"
    rows = page.locator("div.chapters-table tbody tr")
    assert rows.count() >= 9 and rows.first.locator("td").first.inner_text().startswith("01 ")
    labels, widest = cards_on_a_phone(page, cells, "div.chapters-table tbody tr:first-child td")
    assert labels == ['"Chapter: "', '"The paper: "', '"What it shows: "']
    assert widest <= 390, f"a chapters-table cell reaches {widest} px on a 390 px screen"


def test_a_tap_on_a_figure_opens_it_at_full_size(visit):
    """Every figure of a chapter is a link to its own image file (book/featbook.js), which opens
    at the size it was saved (on a phone: the laptop drawing, where its phone drawing or a grid of
    pictures scaled to the column is shown); the line under it says so on a phone only."""
    v, page = visit("notebooks/01_erm_feature_learning.html")
    images = page.locator("div.cell_output img")
    assert images.count() >= 2
    hrefs = page.eval_on_selector_all("div.cell_output img", "imgs => imgs.map(i => i.closest('a.feat-enlarge') ? "
                                                                  "i.closest('a.feat-enlarge').href : null)")
    assert None not in hrefs and all(h.endswith(".png") or h.endswith(".svg") for h in hrefs)
    for href in set(hrefs):
        assert page.request.get(href).ok, f"a figure links to {href}, which the site does not serve"
    hint = "a.feat-enlarge"
    assert page.eval_on_selector(hint, "a => getComputedStyle(a, '::after').content") in ("none", "normal")
    page.set_viewport_size({"width": 390, "height": 844})
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    assert "full size" in page.eval_on_selector(hint, "a => getComputedStyle(a, '::after').content")


#: At a phone's width: per figure drawn again for the phone (featbook.phone's pictures), the image
#: the browser chose and the height its smallest text shows at, beside its laptop drawing's.
PHONE_FIGURES_JS = """(minTextPx) => Array.from(document.querySelectorAll('picture.feat-picture img')).map(img => {
  const shown = img.getBoundingClientRect().width;
  const desk = parseFloat(img.getAttribute('width'));
  return {src: img.currentSrc, text: minTextPx * shown / img.naturalWidth, desk: minTextPx * shown / desk};
})"""


def test_on_a_phone_a_figure_shows_its_phone_drawing_with_text_as_large_as_on_a_laptop(visit):
    """Chapter 02's figures on a 390 px screen: each is its phone drawing (panels one under another,
    featbook.phone), whose smallest text shows at 11 px or more, where the laptop drawing scaled to
    the column would show it under 8 px; at 1280 px the same pictures show the laptop drawing."""
    v, page = visit("notebooks/02_irmv1_and_pretraining.html")
    wide = page.eval_on_selector_all("picture.feat-picture img", "imgs => imgs.map(i => i.currentSrc)")
    assert len(wide) >= 3, f"{len(wide)} figures with a phone drawing"
    page.set_viewport_size({"width": 390, "height": 844})
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    page.wait_for_function("Array.from(document.images).every(img => img.complete)")
    shown = page.evaluate(PHONE_FIGURES_JS, style.text_px())
    assert [s["src"] for s in shown] != wide, "the phone shows the laptop drawings"
    small = [f"{s['src'].rsplit('/', 1)[-1]}: {s['text']:.1f} px" for s in shown if s["text"] < 11]
    assert not small, "figure text under 11 px on a phone:\n" + "\n".join(small)
    assert all(s["desk"] < 8 for s in shown), "the laptop drawing would be legible on a phone: nothing to test"
    assert not v.problems, "\n".join(v.problems)


def test_a_table_of_long_text_is_a_card_per_row_on_a_phone(visit):
    """Chapter 09's tables of long text (featbook.tables.table(..., cards=True)): a table at 1280 px;
    at 390 px each row a card, each cell named by its column (its data-label), none wider than the
    screen, the header hidden. Its decisions are paragraphs, each measurement folded under its own."""
    v, page = visit("notebooks/09_how_the_numbers_were_made.html")
    cells = "table.feat-cards td"
    assert page.locator("table.feat-cards tr").count() >= 4
    header = page.locator("table.feat-cards thead th").first.inner_text()
    labels, widest = cards_on_a_phone(page, cells, "table.feat-cards tbody tr:first-child td")
    assert labels[0] == f'"{header}: "', (labels, header)
    assert page.locator(".feat-decisions details summary", has_text="What was measured").count() >= 1
    assert widest <= 390, f"a card's cell reaches {widest} px on a 390 px screen"
    assert not page.locator("table.feat-cards thead").first.is_visible()


def test_search_finds_the_book(visit):
    v, page = visit("search.html?q=FeAT")
    results = page.locator("#search-results ul.search li")
    results.first.wait_for(state="visible")
    assert results.count() >= 1
    assert not v.problems, "\n".join(v.problems)


#: Measures, in the browser, what does not fit the content column and which figures lack a caption.
LAYOUT_JS = """(minTextPx) => {
  const article = document.querySelector('article.bd-article') || document.querySelector('article');
  const style = getComputedStyle(article), box = article.getBoundingClientRect();
  const left = box.left + parseFloat(style.paddingLeft), right = box.right - parseFloat(style.paddingRight);
  const name = (el) => {
    const cell = el.closest('.cell'), section = el.closest('section');
    const where = section && section.querySelector('h1, h2, h3') ? section.querySelector('h1, h2, h3').textContent.trim() : '';
    return `<${el.tagName.toLowerCase()}${el.className && typeof el.className === 'string' ? ' class="' + el.className + '"' : ''}>`
      + ` in "${where.replace(/#$/, '')}"` + (cell ? ` (cell ${Array.from(document.querySelectorAll('.cell')).indexOf(cell)})` : '');
  };
  const problems = [];
  for (const el of article.querySelectorAll('table, img, pre, div.math, figure, .cell_output > .output')) {
    const b = el.getBoundingClientRect();
    if (b.width === 0 || b.height === 0) continue;  // not displayed
    if (b.left < left - 1 || b.right > right + 1)
      problems.push(`wider than the column (${Math.round(b.width)} px of ${Math.round(right - left)}): ${name(el)}`);
    if (el.tagName === 'TABLE' && el.scrollWidth > el.clientWidth + 1)
      problems.push(`scrolls sideways (${el.scrollWidth} px in ${el.clientWidth}): ${name(el)}`);
  }
  for (const img of article.querySelectorAll('img')) {
    const drawn = parseFloat(img.style.width) || parseFloat(img.getAttribute('width')) || img.naturalWidth;
    if (drawn && img.getBoundingClientRect().width < 0.9 * drawn)
      problems.push(`figure shrunk to ${Math.round(100 * img.getBoundingClientRect().width / drawn)}% of its size `
                    + `(${Math.round(drawn)} px drawn): its text is smaller than the page's: ${name(img)}`);
    const textPx = minTextPx * img.getBoundingClientRect().width / drawn;
    if (img.closest('.cell_output') && drawn && textPx < 11)
      problems.push(`figure text ${textPx.toFixed(1)} px (under 11 px): ${name(img)}`);
    const figure = img.closest('figure');
    const caption = figure && figure.querySelector('figcaption');
    if (!caption || !caption.textContent.trim()) problems.push(`figure without a caption: ${name(img)}`);
  }
  for (const figure of article.querySelectorAll('figure')) {
    const caption = figure.querySelector('figcaption');
    if (!caption || !caption.textContent.trim()) problems.push(`figure without a caption: ${name(figure)}`);
  }
  return {column: right - left, problems};
}"""

#: At a phone's width: every displayed element of the article that reaches past the viewport and
#: is not inside a box that scrolls sideways (code, a wide table, an equation), i.e. what the
#: reader sees cut off at the screen's edge. The page's own sideways scroll is measured apart.
CUT_OFF_JS = """(viewport) => {
  const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const article = document.querySelector('article.bd-article') || document.querySelector('article');
  const cut = [];
  for (const el of article.querySelectorAll('*')) {
    if (el.closest('mjx-assistive-mml, .visually-hidden, script, style')) continue;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || style.display === 'none') continue;
    const box = el.getBoundingClientRect();
    if (box.width < 1 || box.height < 1 || (box.right <= viewport + 1 && box.left >= -1)) continue;
    let parent = el.parentElement, boxed = false;
    while (parent && parent !== article) { if (scrolls(parent)) { boxed = true; break; } parent = parent.parentElement; }
    if (boxed) continue;
    const section = el.closest('section'), heading = section && section.querySelector('h1, h2, h3');
    cut.push(`<${el.tagName.toLowerCase()}> reaching ${Math.round(box.right)} px in "`
             + `${heading ? heading.textContent.trim().replace(/#$/, '') : ''}": `
             + `${(el.textContent || '').trim().slice(0, 50)}`);
  }
  return cut.slice(0, 10);
}"""

#: The text a reader reads: the article less code input, mathematics and navigation (featbook.leaks.SKIPPED).
TEXT_JS = """(skipped) => {
  const article = (document.querySelector('article.bd-article') || document.querySelector('article')).cloneNode(true);
  for (const selector of skipped) article.querySelectorAll(selector).forEach(el => el.remove());
  // a detached clone has no layout, so innerText is its bare textContent: table cells and blocks
  // would run together ("0.30" + "10" + "10" read as the float "0.301010"); separate them as a
  // rendered page does
  article.querySelectorAll('td, th').forEach(el => el.append('\\t'));
  article.querySelectorAll('tr, p, li, div, br, caption, h1, h2, h3, h4').forEach(el => el.append('\\n'));
  return article.innerText;
}"""


def screenshot(page, path):
    """A full-page screenshot of ``page`` in ``_build/screenshots`` (a viewport as tall as the page)."""
    shots = REPO_ROOT / "_build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    height = page.evaluate("document.documentElement.scrollHeight")
    page.set_viewport_size({"width": 1280, "height": min(height, 30000)})
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    page.screenshot(path=str(shots / (Path(path).stem + ".png")), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


@pytest.mark.parametrize("path", toc_pages())
def test_page_fits_the_column_at_1280_px_with_captioned_legible_figures(visit, path):
    v, page = visit(path)
    wait_for_mathjax(v)
    images(page)
    layout = page.evaluate(LAYOUT_JS, style.text_px())
    assert 600 < layout["column"] < 760, f"{path}: content column {layout['column']} px at 1280 px"
    screenshot(page, path)
    assert not layout["problems"], f"{path}:\n" + "\n".join(layout["problems"])
    assert not v.problems, f"{path}:\n" + "\n".join(v.problems)


@pytest.mark.parametrize("path", toc_pages())
def test_page_text_shows_no_leaked_code(visit, path):
    v, page = visit(path)
    wait_for_mathjax(v)
    text = page.evaluate(TEXT_JS, list(SKIPPED))
    assert len(text) > 500, f"{path}: {len(text)} characters of text"
    found = scan_text(text)
    assert not found, f"{path}: code leaked into the page:\n" + "\n".join(map(str, found))


#: What a code cell a reader sees must not be doing: recording values, validating parameters,
#: preflight estimates, assembling the prose (featbook.record, featlib.validation, featbook.runtime,
#: featbook.prose); such cells are tagged remove-cell / remove-input / hide-cell in the chapters.
MACHINERY = ("record(", "prose.say(", "runtime.preflight(", "preflight_text(", "check_int(", "check_bool(",
             "check_sequence(", "check_writable(", "check_positive(", "display(Markdown(")

#: The code of every code cell the reader can see (not removed, not folded behind a toggle).
VISIBLE_CODE_JS = """() => Array.from(document.querySelectorAll('.cell_input'))
  .filter(el => el.checkVisibility ? el.checkVisibility() : el.offsetParent !== null)
  .map(el => el.innerText)"""


#: The text of every cell output the reader can see (a cell tagged remove-input still shows its output).
VISIBLE_OUTPUT_JS = """() => Array.from(document.querySelectorAll('.cell_output'))
  .filter(el => el.checkVisibility ? el.checkVisibility() : el.offsetParent !== null)
  .map(el => el.innerText)"""


def machinery_shown(page):
    """The visible code cells that record, validate, preflight or assemble prose, and the visible
    outputs that show the preflight's estimate (featbook.leaks.PREFLIGHT)."""
    code = [code[:160] for code in page.evaluate(VISIBLE_CODE_JS) if any(m in code for m in MACHINERY)]
    return code + [out[:160] for out in page.evaluate(VISIBLE_OUTPUT_JS) if PREFLIGHT.search(out)]


@pytest.mark.parametrize("path", toc_pages())
def test_page_shows_no_machinery_and_never_scrolls_sideways_at_1280_and_390_px(visit, path):
    v, page = visit(path)
    wait_for_mathjax(v)
    images(page)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
        shown = machinery_shown(page)
        assert not shown, f"{path} at {width} px: visible cells that do machinery:\n" + "\n---\n".join(shown)
        overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 1, f"{path} at {width} px: the page scrolls sideways by {overflow} px"
        cut = page.evaluate(CUT_OFF_JS, width)
        assert not cut, f"{path} at {width} px: cut off at the screen's edge (not in a box that scrolls):\n" + \
            "\n".join(cut)
        text = page.evaluate(TEXT_JS, list(SKIPPED))
        found = scan_text(text)
        assert not found, f"{path} at {width} px: leaked code or template leftovers:\n" + "\n".join(map(str, found))
    assert page.locator('link[rel="icon"]').count() >= 1, f"{path}: no favicon"
    footer = page.locator("footer").all_inner_texts()
    assert any("The FeAT book" in f and "FeAT book team" in f and "Chen" in f for f in footer), f"{path}: footer {footer}"
    shots = REPO_ROOT / "_build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 390, "height": min(page.evaluate("document.documentElement.scrollHeight"), 30000)})
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    page.screenshot(path=str(shots / (Path(path).stem + "-390.png")), full_page=True)
    assert not v.problems, f"{path}:\n" + "\n".join(v.problems)


def wide_boxes_say_so_only_on_a_phone(page, box: str, hint: str) -> str:
    """The boxes ``box`` wider than their column carry a visible line ``p.<hint>`` each on a
    390 px phone and none at 1280 px (book/featbook.js): returns the JS list of the shown lines."""
    lines = f"Array.from(document.querySelectorAll('p.{hint}')).filter(p => !p.hidden)"
    wide = f"() => Array.from(document.querySelectorAll('{box}')).filter(b => b.scrollWidth > b.clientWidth + 1).length"
    assert page.evaluate(wide) == page.evaluate(f"() => {lines}.length") == 0
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_function(f"() => {lines}.length > 0")
    assert page.evaluate(f"() => {lines}.length") == page.evaluate(wide) > 0
    return lines


def test_an_equation_wider_than_a_phone_says_it_scrolls_sideways(visit):
    """Eq. (7) of chapter 04 is wider than a 390 px column and scrolls in its own box, its label cut
    off with no cue (a reader's review): such a box gets the edge shadow and a line under it
    (book/featbook.js, checked again after MathJax typesets); at 1280 px, where it fits, neither."""
    v, page = visit("notebooks/04_feat_on_colored_mnist.html")
    lines = wide_boxes_say_so_only_on_a_phone(page, 'mjx-container[display=\\"true\\"]', "feat-equation-hint")
    assert page.evaluate(f"() => {lines}.every(p => p.previousElementSibling.matches('div.math') && "
                         "p.previousElementSibling.querySelector('mjx-container.feat-overflows'))")
    # under the equation, not beside it
    assert page.evaluate(f"() => {lines}.every(p => p.getBoundingClientRect().top >= "
                         "p.previousElementSibling.getBoundingClientRect().bottom - 1)")


def test_a_table_wider_than_a_phone_says_it_scrolls_sideways(visit):
    """Table 7 (six columns) does not fit 390 px and scrolls in its own box: a line under it says
    there are more columns (book/featbook.js); at 1280 px, where it fits, no such line shows."""
    v, page = visit("notebooks/04_feat_on_colored_mnist.html")
    lines = wide_boxes_say_so_only_on_a_phone(page, "div.feat-table-scroll", "feat-scroll-hint")
    # the hint sits right under the box it is about
    assert page.evaluate(f"() => {lines}.every(p => p.previousElementSibling.scrollWidth > "
                         "p.previousElementSibling.clientWidth + 1)")


def test_text_glued_from_results_reads_as_the_prose_around_it(visit):
    """myst-nb sets glued text in bold, which made whole verdict paragraphs bold (chapter 03);
    book/featbook.css gives it the weight of the prose around it."""
    v, page = visit("notebooks/03_ood_objectives_need_rich_features.html")
    weights = page.eval_on_selector_all(
        "p span.pasted-text", "spans => spans.map(s => [getComputedStyle(s).fontWeight, getComputedStyle(s.parentElement).fontWeight])")
    assert weights and all(own == around for own, around in weights), weights
