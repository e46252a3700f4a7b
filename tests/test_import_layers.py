"""The import layers of server/ (``[tool.importlinter]`` in pyproject.toml): a module imports only from its own
layer or lower, TYPE_CHECKING imports included; the clients (``chatsync_client``) know only the wire models;
nothing of the server below the ``chatsync`` command imports the composition root (``server.app``) or the
clients. docs/architecture.md's table and the README's map list the same layers, in the same order."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import grimp

ROOT = Path(__file__).resolve().parents[1]


def contracts() -> dict[str, dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["name"]: c for c in config["contracts"]}


def server_modules() -> set[str]:
    """``server``'s direct children: its packages and top-level modules."""
    return {
        f"server.{p.stem}"
        for p in (ROOT / "server").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }


def test_imports_follow_the_layers() -> None:
    tool = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert tool is not None, "import-linter is a dev dependency: bash scripts/setup.sh installs it"
    done = subprocess.run([tool], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_type_checking_imports_count() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert config["exclude_type_checking_imports"] is False


def test_only_the_command_imports_the_composition_root() -> None:
    graph = grimp.build_graph("server", "chatsync_client", exclude_type_checking_imports=False)
    assert graph.find_modules_that_directly_import("server.app") == {"server.cli"}


def test_the_http_surfaces_read_the_database_only_through_services() -> None:
    """server/http names of server/store only the ``User`` type (a caller, as the transports hand it over); every
    read or write goes through a service (``/readyz``'s schema check: ``services/readiness.py``)."""
    graph = grimp.build_graph("server", exclude_type_checking_imports=False)
    for importer in graph.find_children("server.http") | graph.find_descendants("server.http"):
        for imported in graph.find_modules_directly_imported_by(importer):
            if imported != "server.store" and not imported.startswith("server.store."):
                continue
            assert imported == "server.store.models", f"{importer} imports {imported}"
            for detail in graph.get_import_details(importer=importer, imported=imported):
                line = detail["line_contents"]
                assert re.fullmatch(r"from \.+store\.models import User", line), f"{importer}: {line}"


def test_the_contracts_name_every_module_of_the_server() -> None:
    """A package added to server/ has a place in the layers, and the two forbidden contracts cover it."""
    named = contracts()
    modules = server_modules()
    layered = {m.strip() for layer in named["server layers"]["layers"] for m in layer.split("|")}
    assert layered == modules
    assert set(named["the clients know only the wire models"]["forbidden_modules"]) == modules - {"server.domain"}
    assert set(named["the server does not import the clients"]["source_modules"]) == modules - {"server.cli"}


def test_the_architecture_table_lists_the_layers_in_order() -> None:
    """docs/architecture.md's table of layers: one row per import-linter layer, top to bottom, naming folders and
    modules of server/ that exist."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("## 1. The layers") : text.index("## 2.")]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| layer ")]
    table = []
    for row in rows:
        names = re.findall(r"`([a-z_]+(?:\.py|/))`", row.split("|")[2])
        for name in names:
            assert (ROOT / "server" / name).exists(), f"docs/architecture.md names server/{name}, which is not there"
        table.append({"server." + name.removesuffix(".py").removesuffix("/") for name in names})
    layers = [{m.strip() for m in layer.split("|")} for layer in contracts()["server layers"]["layers"]]
    assert table == layers


def test_the_readme_map_is_the_tree() -> None:
    """The README's layout names every folder and module of server/ (``web/dist/``, the built web app, holds no
    code), top layer first."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("## Layout") :]
    block = block[block.index("\nserver/") : block.index("\nchatsync_client/")]
    entries = [m.group(1) for m in re.finditer(r"^  ([a-z_]+(?:\.py|/)(?:, [a-z_]+\.py)*) ", block, re.M)]
    names = ["server." + n.removesuffix(".py").removesuffix("/") for e in entries for n in e.split(", ")]
    layer_of = {
        m.strip(): i for i, layer in enumerate(contracts()["server layers"]["layers"]) for m in layer.split("|")
    }
    assert sorted(names) == sorted(layer_of)
    assert [layer_of[n] for n in names] == sorted(layer_of[n] for n in names)
