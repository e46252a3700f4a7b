FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY server ./server
COPY alembic ./alembic
RUN pip install --no-cache-dir .
ENV CHATSYNC_HOST=0.0.0.0 CHATSYNC_PORT=8787
EXPOSE 8787
HEALTHCHECK --interval=5s --timeout=3s --retries=10 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8787/readyz').status == 200 else 1)"
CMD ["chatsync", "serve"]
