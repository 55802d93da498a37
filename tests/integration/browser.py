"""Headless Chromium for the HTML tests: open a local page, collect console errors, evaluate JS, screenshot.

    errors = render_page(html_path, screenshot_path, wait_ms=300)     # the simple form
    with open_page(html_path) as page:                                 # to drive the page
        page.evaluate("arcViewer.jumpToLevel(2)")
        page.screenshot(shot_path)
        assert page.errors == []

How: Chromium is started with `--remote-debugging-port=0` (it picks a free port and writes it to
`DevToolsActivePort` in its fresh `--user-data-dir`), and we speak the Chrome DevTools Protocol to the page
target over a websocket (package `websocket-client`). This was chosen over `--screenshot`/`--dump-dom` plus
parsing `--enable-logging=stderr` because the CDP gives structured events instead of log lines whose format
changes between Chromium versions, lets the test call the page's JS after load (`Runtime.evaluate`), and
reports uncaught exceptions with their text.

Errors collected (`Page.errors`): console.error/assert calls, uncaught exceptions, and browser log entries
of level "error" (a failed resource load, a blocked request). Every http(s)/ws(s) request is blocked
(`Network.setBlockedURLs`) and recorded in `Page.requests`: a self-contained page makes none.

Only one page is open at a time across pytest workers (an exclusive lock file held while a page is open), to
spare shared CPUs; never open a page while holding another one (the lock is not re-entrant). The
browser is the one the Makefile installs (`make browser`: Debian's `chromium`, when run as root with apt-get).
When it is missing, CI (`CI` set, as .ci/run does) fails the browser tests: they must run there. Elsewhere
(a user's `make test` without root) they are reported as skipped, the reason saying exactly that Chromium is
missing and how to get it, rather than failing for a machine setup the user may not be allowed to change.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio", "--no-default-browser-check",
)
LOCK_PATH = Path(tempfile.gettempdir()) / "arcstudy-chromium.lock"
STARTUP_TIMEOUT_S = 30.0
COMMAND_TIMEOUT_S = 30.0


class BrowserError(RuntimeError):
    pass


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


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
    missing = ("Chromium not found at /usr/bin/chromium: `make browser` installs it as root with apt-get "
               "(apt-get install --no-install-recommends chromium), or set ARCSTUDY_CHROMIUM to a Chromium/Chrome binary")
    if in_ci():
        raise BrowserError(missing + " (CI requires the browser tests)")
    pytest.skip(f"browser test not run: {missing}")


def _websocket():
    try:
        import websocket  # websocket-client
    except ImportError as err:  # pragma: no cover - a setup problem, reported clearly
        raise BrowserError("the browser tests need the `websocket-client` package (pip install websocket-client)") from err
    return websocket


@contextmanager
def _exclusive_lock() -> Iterator[None]:
    with open(LOCK_PATH, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Page:
    """A CDP session on one page target."""

    def __init__(self, ws_url: str, *, width: int, height: int) -> None:
        websocket = _websocket()
        self._ws = websocket.create_connection(ws_url, timeout=COMMAND_TIMEOUT_S, suppress_origin=True)
        self._next_id = 0
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.send("Runtime.enable")
        self.send("Log.enable")
        self.send("Page.enable")
        self.send("Network.enable")
        self.send("Network.setBlockedURLs", urls=["http://*", "https://*", "ws://*", "wss://*"])
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    # -- protocol ---------------------------------------------------------------------------------------
    def _handle_event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        self.events.append(message)
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", []))
            self.errors.append(f"console.{params['type']}: {text}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            exc = details.get("exception", {}) or {}
            text = exc.get("description") or details.get("text", "exception")
            self.errors.append(f"uncaught: {text} (line {details.get('lineNumber')}, column "
                               f"{details.get('columnNumber')})")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log.{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
        elif method == "Network.requestWillBeSent":
            url = params.get("request", {}).get("url", "")
            if not url.startswith(("data:", "blob:", "about:")):
                self.requests.append(url)

    def _receive(self, deadline: float) -> dict[str, Any]:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError("timed out waiting for Chromium")
            self._ws.settimeout(remaining)
            message = json.loads(self._ws.recv())
            if "method" in message:
                self._handle_event(message)
            return message

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        call_id = self._next_id
        self._ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while True:
            message = self._receive(deadline)
            if message.get("id") == call_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})

    def wait_for_event(self, method: str, timeout_s: float = COMMAND_TIMEOUT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            message = self._receive(deadline)
            if message.get("method") == method:
                return message.get("params", {})

    def pump(self, ms: float) -> None:
        """Let the page run for `ms` milliseconds, collecting events meanwhile."""
        deadline = time.monotonic() + ms / 1000
        while True:
            try:
                self._receive(deadline)
            except BrowserError:
                return
            except Exception as err:  # websocket timeout while idle
                if type(err).__name__ == "WebSocketTimeoutException":
                    return
                raise

    # -- conveniences -------------------------------------------------------------------------------
    def navigate(self, url: str, *, wait_ms: float = 0) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for_event("Page.loadEventFired")
        if wait_ms:
            self.pump(wait_ms)

    def evaluate(self, expression: str) -> Any:
        """Evaluate JS in the page and return its value (JSON-serialisable values; promises awaited)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = (details.get("exception") or {}).get("description") or details.get("text")
            raise BrowserError(f"evaluate({expression!r}) raised: {text}")
        return result.get("result", {}).get("value")

    def screenshot(self, path: Path | str, *, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self.send("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics.get("contentSize")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": size["width"],
                                                            "height": min(size["height"], 8000), "scale": 1})
        data = self.send("Page.captureScreenshot", **params)["data"]
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(data))
        return out

    def close(self) -> None:
        try:
            self._ws.close()
        except Exception:  # noqa: BLE001 - closing a socket the browser may already have dropped
            pass


def _read_port(user_dir: Path, proc: subprocess.Popen, deadline: float) -> int:
    marker = user_dir / "DevToolsActivePort"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BrowserError(f"Chromium exited with code {proc.returncode} at startup")
        if marker.is_file():
            text = marker.read_text().split("\n")
            if text and text[0].strip().isdigit():
                return int(text[0])
        time.sleep(0.05)
    raise BrowserError("Chromium did not open its debugging port in time")


def _stop(proc: subprocess.Popen) -> None:
    """Stop the Chromium we started (its own process group: the browser and its helper processes)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


class Browser:
    """One headless Chromium process (fresh user-data-dir); open pages with `page(html_path)`."""

    def __init__(self, user_dir: Path, *, width: int = 1280, height: int = 900) -> None:
        self.width, self.height = width, height
        args = [find_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={user_dir}", "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1", f"--window-size={width},{height}", "about:blank"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        try:
            self.port = _read_port(user_dir, self.proc, time.monotonic() + STARTUP_TIMEOUT_S)
        except BaseException:
            _stop(self.proc)
            raise

    def _new_target(self) -> tuple[str, str]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    target = json.loads(response.read())
                return target["id"], target["webSocketDebuggerUrl"]
            except OSError:
                if time.monotonic() > deadline:
                    raise BrowserError("Chromium did not open a new page target") from None
                time.sleep(0.05)

    @contextmanager
    def page(self, html_path: Path | str, *, wait_ms: float = 300) -> Iterator[Page]:
        """Open `html_path` (a local file) in a new tab and yield the Page after its load event plus `wait_ms`
        of running time; the tab is closed on exit."""
        html = Path(html_path).resolve()
        if not html.is_file():
            raise FileNotFoundError(html)
        with _exclusive_lock():
            target_id, ws_url = self._new_target()
            page = Page(ws_url, width=self.width, height=self.height)
            try:
                page.navigate(html.as_uri(), wait_ms=wait_ms)
                yield page
            finally:
                page.close()
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/close/{target_id}", timeout=5).close()
                except OSError:
                    pass

    def close(self) -> None:
        _stop(self.proc)


@contextmanager
def browser(*, width: int = 1280, height: int = 900) -> Iterator[Browser]:
    """A headless Chromium for the duration of the block. Pages, not browsers, are serialised: an idle browser
    costs nothing, and a test module keeps its browser without making another worker wait for the module."""
    with tempfile.TemporaryDirectory(prefix="arcstudy-chromium-") as tmp:
        instance = Browser(Path(tmp), width=width, height=height)
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
    `screenshot_path`; returns the console errors (empty for a clean page). Blocked network requests made by
    the page are returned as errors too."""
    with open_page(html_path, wait_ms=wait_ms) as page:
        page.screenshot(screenshot_path)
        return list(page.errors) + [f"network request: {url}" for url in page.requests
                                    if not url.startswith("file:")]
