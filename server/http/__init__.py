"""The server's HTTP surfaces. ``asgi.ChatsyncApp`` is the ASGI app: it mounts every route below, runs the tRPC
fast paths and, for its lifespan, opens the services the composition root (``server.app``) builds. The routes:
the tRPC endpoints (``trpc.py``: the WebSocket upgrade, checked against ``origins.py``, and HTTP; the
transports themselves are ``server.rpc``), health and readiness (``health.py``), device sign-in links
(``link.py``), files (``files.py``), session export and import (``transcripts.py``), admin inspection
(``admin/``) and the built web app (``web.py``)."""
