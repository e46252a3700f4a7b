"""The benchmarks still start: every script under ``bench/`` imports (the names it takes from the server, the
clients and the test kit exist). The benchmarks themselves are run by hand (docs/performance.md), so without
this a rename elsewhere breaks them unnoticed until someone measures."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")


def test_there_are_benchmarks() -> None:
    assert {"capacity", "fanout", "streaming"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_benchmark_imports(name: str) -> None:
    module = importlib.import_module(f"bench.{name}")
    source = (BENCH / f"{name}.py").read_text()
    if '__name__ == "__main__"' in source:
        assert callable(getattr(module, "main", None)), f"bench/{name}.py runs as a script but has no main()"
