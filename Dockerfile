# Arena in a container: the install and serve commands CI runs (`./dev`), nothing else.
# Not built or run here (no container engine on the project's machines): see docs/deployment.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/app/.venv/bin:$PATH \
    ARENA_SNAPSHOT_DIR=/data/snapshots

# pg_dump / pg_restore for `arena backup` on PostgreSQL (Debian's client; match or exceed the server).
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-client \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 arena && mkdir -p /app /data && chown arena:arena /app /data
WORKDIR /app
USER arena

COPY --chown=arena:arena pyproject.toml README.md requirements.lock ./
COPY --chown=arena:arena arena ./arena
COPY --chown=arena:arena votes ./votes
COPY --chown=arena:arena leaderboard ./leaderboard
COPY --chown=arena:arena templates ./templates
# As ./dev sets up: uv into the system Python, a virtual environment, the locked run-time versions checked
# against their hashes (requirements.lock, without [dev]), then the project itself adding nothing, all
# compiled to bytecode once (PYTHONDONTWRITEBYTECODE: no process would ever cache what it compiles).
RUN python -m pip install --quiet --disable-pip-version-check --user uv \
    && python -m uv venv --quiet .venv --python python \
    && python -m uv pip install --quiet --python .venv/bin/python --require-hashes -r requirements.lock \
    && python -m uv pip install --quiet --python .venv/bin/python --no-deps -e . \
    && { .venv/bin/python -m compileall -qq -j 0 .venv/lib arena votes leaderboard || true; }

VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"]
ENTRYPOINT ["arena", "serve", "--host", "0.0.0.0", "--port", "8000"]
CMD ["--workers", "2"]
