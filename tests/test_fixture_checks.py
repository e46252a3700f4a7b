"""The checks ``tests/conftest.py`` makes of a test's fixtures before it runs (``fixture_checks``)."""

from __future__ import annotations

import pytest
from fixture_checks import problem, setup_order

pytestmark = pytest.mark.fast


def order_of(test_args: list[str], fixtures: dict[str, list[str]]) -> list[str]:
    return setup_order(test_args, fixtures.get)


def test_a_fixture_is_set_up_after_what_it_asks_for() -> None:
    fixtures = {"tx": ["server_factory", "db_url"], "server_factory": ["tmp_path"], "db_url": [], "tmp_path": []}
    assert order_of(["tx"], fixtures) == ["tmp_path", "server_factory", "db_url", "tx"]
    assert order_of(["db_url", "server_factory"], fixtures) == ["db_url", "tmp_path", "server_factory"]


def test_servers_set_up_before_their_database_are_refused() -> None:
    fixtures = {"server_factory": [], "db_url": [], "pg_url": [], "tx": ["server_factory", "db_url"]}
    assert "server_factory is set up before db_url" in (problem(order_of(["tx"], fixtures), fast=False) or "")
    assert "before pg_url" in (problem(order_of(["server_factory", "pg_url"], fixtures), fast=False) or "")
    assert problem(order_of(["db_url", "server_factory"], fixtures), fast=False) is None
    assert problem(order_of(["server_factory"], fixtures), fast=False) is None


def test_a_fast_test_uses_no_server_or_database_server() -> None:
    assert "fast uses server_factory" in (problem(["tmp_path", "server_factory"], fast=True) or "")
    assert "fast uses pg_url" in (problem(["pg_url"], fast=True) or "")
    assert problem(["tmp_path", "migrated_template", "services"], fast=True) is None
