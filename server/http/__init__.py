"""The server's HTTP surfaces, each a list of Starlette routes the composition root (``server.app``) mounts:
device sign-in links (``link.py``), files (``files.py``), session export and import (``transcripts.py``), admin
inspection (``admin/``) and the built web app (``web.py``). The tRPC transports themselves are ``server.rpc``."""
