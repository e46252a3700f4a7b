"""The import layers of server/ (``[tool.importlinter]`` in pyproject.toml, docs/architecture.md): a module
imports only from its own layer or lower, and the terminal clients know only the wire models."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_imports_follow_the_layers() -> None:
    tool = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert tool is not None, "import-linter is a dev dependency: bash scripts/setup.sh installs it"
    done = subprocess.run([tool], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
