"""Headless Chromium for the HTML tests, driven by Playwright: open a local page, collect console errors,
evaluate JS, screenshot.

    errors = render_page(html_path, screenshot_path, wait_ms=300)     # the simple form
    with open_page(html_path) as page:                                 # to drive the page
        page.evaluate("arcViewer.jumpToLevel(2)")
        page.screenshot(shot_path)
        assert page.errors == []

Playwright (the `dev` extra) drives the system's Chromium (`executable_path`): no browser is downloaded, the
binary is the one the Makefile installs (`make browser`: Debian's `chromium`, when run as root with apt-get) or
$ARCSTUDY_CHROMIUM. When it is missing, CI (`CI` set, as .ci/run does) fails the browser tests: they must run
there. Elsewhere (a user's `make test` without root) they are reported as skipped, the reason saying exactly that
Chromium is missing and how to get it, rather than failing for a machine setup the user may not be allowed to
change.

Errors collected (`Page.errors`): console.error/assert calls (a failed resource load is one too) and uncaught
exceptions. Every http(s) request is aborted and every request or websocket to a network address is recorded in
`Page.requests`: a self-contained page makes none.

Only one page is open at a time across pytest workers (an exclusive lock file held while a page is open), to
spare shared CPUs; never open a page while holding another one (the lock is not re-entrant).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
CHROMIUM_ARGS = (  # Playwright adds --headless and its own automation flags
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
)
LOCK_PATH = Path(tempfile.gettempdir()) / "arcstudy-chromium.lock"
TIMEOUT_MS = 30_000
MAX_SHOT_HEIGHT = 8000  # CSS pixels of a full-page screenshot at most
NETWORK = re.compile(r"^(https?|wss?)://", re.IGNORECASE)


class BrowserError(RuntimeError):
    pass


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def _not_available(reason: str) -> None:
    if in_ci():
        raise BrowserError(reason + " (CI requires the browser tests)")
    pytest.skip(f"browser test not run: {reason}")


def find_chromium() -> str:
    """The Chromium binary ($ARCSTUDY_CHROMIUM, else the Debian paths). When missing: in CI an error, elsewhere
    the calling test is skipped with the reason (see the module docstring)."""
    override = os.environ.get("ARCSTUDY_CHROMIUM")
    for candidate in ((override,) if override else ()) + CHROMIUM_CANDIDATES:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("chromium")
    if found:
        return found
    _not_available("Chromium not found at /usr/bin/chromium: `make browser` installs it as root with apt-get "
                   "(apt-get install --no-install-recommends chromium), or set ARCSTUDY_CHROMIUM to a "
                   "Chromium/Chrome binary")
    raise AssertionError("unreachable")  # pragma: no cover - _not_available raised or skipped


def _sync_playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _not_available("the browser tests need Playwright (pip install -e '.[dev]' installs it; no browser "
                       "download: the system Chromium is used)")
        raise
    return sync_playwright


@contextmanager
def _exclusive_lock() -> Iterator[None]:
    with open(LOCK_PATH, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Page:
    """One Playwright page with what the tests look at: `errors`, `requests`, `evaluate`, `screenshot`."""

    def __init__(self, page: Any) -> None:
        self._page = page
        self.errors: list[str] = []
        self.requests: list[str] = []
        page.set_default_timeout(TIMEOUT_MS)
        page.on("console", self._console)
        page.on("pageerror", lambda err: self.errors.append(f"uncaught: {err}"))
        page.on("request", self._request)
        page.on("websocket", lambda ws: self.requests.append(ws.url))
        page.route(NETWORK, lambda route: route.abort())  # nothing leaves the machine

    def _console(self, message: Any) -> None:
        if message.type in ("error", "assert"):
            self.errors.append(f"console.{message.type}: {message.text}")

    def _request(self, request: Any) -> None:
        if not request.url.startswith(("data:", "blob:", "about:")):
            self.requests.append(request.url)

    @property
    def playwright_page(self) -> Any:
        """The Playwright page itself, for what this wrapper does not cover."""
        return self._page

    def navigate(self, url: str, *, wait_ms: float = 0) -> None:
        self._page.goto(url, wait_until="load")
        if wait_ms:
            self.pump(wait_ms)

    def evaluate(self, expression: str) -> Any:
        """Evaluate JS in the page (an expression, or statements: the value of the last one) and return its value
        (JSON-serialisable values; promises awaited)."""
        try:
            return self._page.evaluate("(source) => (0, eval)(source)", expression)
        except Exception as err:  # playwright's Error: the page's exception, with the expression
            raise BrowserError(f"evaluate({expression!r}) raised: {err}") from err

    def pump(self, ms: float) -> None:
        """Let the page run for `ms` milliseconds, collecting events meanwhile."""
        self._page.wait_for_timeout(ms)

    def emulate_media(self, media: str) -> None:
        """"print" or "screen": the CSS media the page is laid out for."""
        self._page.emulate_media(media=media)

    def screenshot(self, path: Path | str, *, full_page: bool = True) -> Path:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        options: dict[str, Any] = {"path": str(out), "full_page": full_page}
        if full_page:
            width, height = self.evaluate("[document.documentElement.scrollWidth, document.documentElement"
                                          ".scrollHeight]")
            if height > MAX_SHOT_HEIGHT:
                options["clip"] = {"x": 0, "y": 0, "width": width, "height": MAX_SHOT_HEIGHT}
        self._page.screenshot(**options)
        return out


class Browser:
    """One headless Chromium (a fresh profile); open pages with `page(html_path)`."""

    def __init__(self, chromium: Any, *, width: int = 1280, height: int = 900) -> None:
        self.width, self.height = width, height
        self._browser = chromium.launch(executable_path=find_chromium(), args=list(CHROMIUM_ARGS), headless=True,
                                        timeout=TIMEOUT_MS)

    @contextmanager
    def page(self, html_path: Path | str, *, wait_ms: float = 300) -> Iterator[Page]:
        """Open `html_path` (a local file) in a new page and yield it after its load event plus `wait_ms` of
        running time; the page is closed on exit."""
        html = Path(html_path).resolve()
        if not html.is_file():
            raise FileNotFoundError(html)
        with _exclusive_lock():
            context = self._browser.new_context(viewport={"width": self.width, "height": self.height},
                                                device_scale_factor=1)
            try:
                page = Page(context.new_page())
                page.navigate(html.as_uri(), wait_ms=wait_ms)
                yield page
            finally:
                context.close()

    def close(self) -> None:
        self._browser.close()


@contextmanager
def browser(*, width: int = 1280, height: int = 900) -> Iterator[Browser]:
    """A headless Chromium for the duration of the block. Pages, not browsers, are serialised: an idle browser
    costs nothing, and a test module keeps its browser without making another worker wait for the module."""
    find_chromium()  # skip (or fail in CI) before starting Playwright's driver
    with _sync_playwright()() as playwright:
        instance = Browser(playwright.chromium, width=width, height=height)
        try:
            yield instance
        finally:
            instance.close()


@contextmanager
def open_page(html_path: Path | str, *, wait_ms: float = 300, width: int = 1280, height: int = 900) -> Iterator[Page]:
    """A fresh browser with one page (see `Browser.page`)."""
    with browser(width=width, height=height) as instance, instance.page(html_path, wait_ms=wait_ms) as page:
        yield page


def render_page(html_path: Path | str, screenshot_path: Path | str, *, wait_ms: float = 300) -> list[str]:
    """Open `html_path` in headless Chromium, wait `wait_ms` after load, save a full-page PNG screenshot to
    `screenshot_path`; returns the console errors (empty for a clean page). Network requests made by the page
    (aborted) are returned as errors too."""
    with open_page(html_path, wait_ms=wait_ms) as page:
        page.screenshot(screenshot_path)
        return list(page.errors) + [f"network request: {url}" for url in page.requests
                                    if not url.startswith("file:")]
