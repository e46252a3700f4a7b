# Two stages: the wheel is built where Node is (the build backend builds the web app from client_js/ into
# the package), and the runtime image installs only that wheel: Python, no Node, no sources, a non-root user.
FROM node:20-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /build-venv \
 && /build-venv/bin/pip install --no-cache-dir "build>=1.2"
WORKDIR /src
COPY . .
RUN /build-venv/bin/python -m build --wheel --outdir /wheels .

FROM python:3.11-slim
RUN useradd --system --uid 10001 --user-group --home-dir /data --create-home chatsync
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/chatsync-*.whl && rm -rf /wheels
USER 10001:10001
# The working directory holds what the defaults write: the SQLite file and, on a first start with an empty
# database, the owner's token (chatsync-owner-token). Mount a volume here, or point CHATSYNC_DATABASE_URL at
# PostgreSQL.
WORKDIR /data
ENV CHATSYNC_HOST=0.0.0.0 CHATSYNC_PORT=8787 PYTHONUNBUFFERED=1
EXPOSE 8787
HEALTHCHECK --interval=5s --timeout=3s --retries=10 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8787/readyz').status == 200 else 1)"
CMD ["chatsync", "serve"]
