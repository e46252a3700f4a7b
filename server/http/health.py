"""``GET /healthz`` (the process answers) and ``GET /readyz`` (it can serve: docs/operations.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .state import AppState

CHECK_SECONDS = 2.0


def health_routes(state: AppState) -> list[Route]:
    """``state`` is the running app's: no services while it starts, ``drained`` once it drains."""

    async def healthz(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(_request: Request) -> JSONResponse:
        """Readiness, for a load balancer or Kubernetes: 200 when the database answers, the bus is connected,
        the schema is at this code's head (or ahead of it: newer code migrated it) and the process is not
        draining; 503 otherwise. The report says which, either way. Each check gives up after
        ``CHECK_SECONDS``, so a hung dependency makes a prompt 503, not a hung probe."""
        services = state.services
        if services is None:
            return JSONResponse({"status": "starting"}, status_code=503)
        (schema, database), (_, bus) = await asyncio.gather(
            _check(services.readiness.schema()), _check(services.bus.ping())
        )
        migrations: dict[str, Any] = schema if schema is not None else {"state": "unknown"}
        draining = state.drained
        ready = database["up"] and bus["up"] and migrations["state"] in ("head", "ahead") and not draining
        report = {
            "status": "ready" if ready else "draining" if draining else "unavailable",
            "database": database,
            "bus": bus,
            "migrations": migrations,
            "draining": draining,
            "connections": len(services.connections),
        }
        return JSONResponse(report, status_code=200 if ready else 503, headers={"cache-control": "no-store"})

    return [Route("/healthz", healthz), Route("/readyz", readyz)]


async def _check(probe: Awaitable[Any]) -> tuple[Any, dict[str, Any]]:
    try:
        return await asyncio.wait_for(probe, CHECK_SECONDS), {"up": True}
    except TimeoutError:
        return None, {"up": False, "error": f"no answer in {CHECK_SECONDS:g} s"}
    except Exception as exc:  # the type only: messages may carry addresses or credentials
        return None, {"up": False, "error": type(exc).__name__}
