"""The README's pictures, taken from the real demo so that they cannot drift from it: `make screenshots`.

Run after `make demo` (it reads reports/demo/*.html). Each page is opened in headless Chromium
(`/usr/bin/chromium`, or $ARCSTUDY_CHROMIUM) at a desktop viewport and its top (title, contents, the
overview) is rendered at a reduced device scale, so that the PNG (docs/img/<page>.png) is small; nothing
but Chromium and the standard library is needed.

    .venv/bin/python docs/screenshots.py [--reports reports/demo] [--out docs/img]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"index": "index.html", "calibration": "calibration.html", "scores": "scores.html", "harc": "harc.html"}
WINDOW = (1280, 1300)  # CSS pixels of the viewport (headless Chromium cannot scroll before the shot)
SCALE = 0.7  # device pixels per CSS pixel: an 896 x 910 PNG, legible and small


def chromium() -> str:
    path = os.environ.get("ARCSTUDY_CHROMIUM", "/usr/bin/chromium")
    if not Path(path).is_file():
        sys.exit(f"screenshots: no Chromium at {path} (install Debian's chromium, or set $ARCSTUDY_CHROMIUM)")
    return path


def shoot(browser: str, page: Path, png: Path) -> None:
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="arcstudy-shot-") as profile:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={profile}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
                        f"--force-device-scale-factor={SCALE}", "--virtual-time-budget=5000",
                        f"--screenshot={png.resolve()}", page.resolve().as_uri()],
                       check=True, capture_output=True, timeout=120)
    if not png.is_file() or png.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"screenshots: Chromium wrote no PNG for {page}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=Path, default=ROOT / "reports" / "demo")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args(argv)
    missing = [page for page in PAGES.values() if not (args.reports / page).is_file()]
    if missing:
        sys.exit(f"screenshots: {', '.join(missing)} not found in {args.reports}: run `make demo` first")
    browser = chromium()
    for name, page in PAGES.items():
        png = args.out / f"{name}.png"
        shoot(browser, args.reports / page, png)
        print(f"{png} ({png.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
