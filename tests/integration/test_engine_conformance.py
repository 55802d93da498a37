"""The shared conformance kit passes on ``engine`` (every fixture game, every golden step)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"


def test_conformance_kit_passes_every_game():
    kit = SHARED / "conformance"
    command = [
        sys.executable, str(kit / "check.py"), "--engine", "engine",
        "--games", str(kit / "environment_files"), "--golden", str(kit / "golden"), "--path", str(REPO),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert summary.startswith("conformance: 8/8 games pass"), summary
