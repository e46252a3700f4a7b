# The web app is built with Node in a stage of its own; the runtime image has Python only.
FROM node:20-slim AS web
WORKDIR /build/client_js
COPY client_js/package.json client_js/package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error
COPY client_js ./
RUN npm run build:app

FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY server ./server
COPY alembic ./alembic
COPY --from=web /build/server/web/dist ./server/web/dist
# Installed in place: the server finds its migrations (./alembic) and the built web app beside its package.
RUN pip install --no-cache-dir -e .
ENV CHATSYNC_HOST=0.0.0.0 CHATSYNC_PORT=8787
EXPOSE 8787
HEALTHCHECK --interval=5s --timeout=3s --retries=10 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8787/readyz').status == 200 else 1)"
CMD ["chatsync", "serve"]
