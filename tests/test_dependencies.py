"""What the installed packages import is declared: every third-party module that a package of this project imports
(anywhere in it, lazily too) comes from a distribution named in ``pyproject.toml``'s ``dependencies`` or in an
optional group other than ``dev``, not only through some other dependency that happens to require it today."""

from __future__ import annotations

import ast
import fnmatch
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    """The distributions the project asks for when installed (``dev`` is for working on it)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for group, items in project.get("optional-dependencies", {}).items():
        if group != "dev":
            wanted += items
    return {_normal(re.split(r"[\s\[<>=!~;]", item, maxsplit=1)[0]) for item in wanted}


def packages() -> list[Path]:
    """The top-level packages a wheel installs (``[tool.setuptools.packages.find]``'s ``include``)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return sorted(
        path
        for path in ROOT.iterdir()
        if (path / "__init__.py").exists() and any(fnmatch.fnmatch(path.name, p) for p in config["include"])
    )


def imported(package: Path) -> dict[str, str]:
    """Top-level modules imported anywhere in ``package``, with one file that imports each."""
    found: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_a_declared_dependency() -> None:
    ours = {p.name for p in packages()}
    assert "server" in ours
    wanted = declared()
    providers = importlib.metadata.packages_distributions()
    missing = []
    for package in packages():
        for module, where in imported(package).items():
            if module in sys.stdlib_module_names or module in ours or module == "__future__":
                continue
            dists = {_normal(d) for d in providers.get(module, [])}
            if not dists & wanted:
                missing.append(f"{module} (imported by {where}; installed from {sorted(dists) or 'nothing'})")
    assert not missing, "imported but not declared in pyproject.toml:\n" + "\n".join(missing)
