"""What ``tests/conftest.py`` checks of every test's fixtures before it runs (imported as ``fixture_checks``).

pytest tears fixtures down in the reverse order it set them up, so a test (or fixture) that asks for a server
fixture before a database fixture drops the database under live servers: their teardown then waits on a database
that is gone. And a test marked ``fast`` runs in-process: no server, no database server, no browser."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

# Fixtures that start servers, and fixtures that drop a database at teardown.
SERVER_FIXTURES = frozenset({"server_factory"})
DATABASE_FIXTURES = frozenset({"pg_url", "db_url"})
# Fixtures a ``fast`` test must not use.
SLOW_FIXTURES = SERVER_FIXTURES | DATABASE_FIXTURES | {"redis_cluster", "cluster_factory", "web_server"}


def setup_order(names: Iterable[str], asks_for: Callable[[str], Sequence[str] | None]) -> list[str]:
    """The fixtures ``names`` in the order pytest sets them up, each after the fixtures it asks for
    (``asks_for(name)``: its arguments; None for a name that is not a fixture)."""
    order: list[str] = []

    def visit(name: str) -> None:
        deps = asks_for(name)
        if name in order or deps is None:
            return
        for dep in deps:
            visit(dep)
        if name not in order:
            order.append(name)

    for name in names:
        visit(name)
    return order


def problem(order: Sequence[str], fast: bool) -> str | None:
    """Why fixtures set up in ``order`` must not run (``fast``: the test is marked fast), or None."""
    if fast and SLOW_FIXTURES.intersection(order):
        slow = ", ".join(sorted(SLOW_FIXTURES.intersection(order)))
        return f"a test marked fast uses {slow}: move it to a module that is not marked fast"
    for server in sorted(SERVER_FIXTURES.intersection(order)):
        late = sorted(db for db in DATABASE_FIXTURES.intersection(order) if order.index(db) > order.index(server))
        if late:
            return (
                f"{server} is set up before {', '.join(late)}, so the database would be dropped under live servers "
                f"at teardown: ask for the database fixture first (e.g. `async def x({late[0]}, {server})`)"
            )
    return None
