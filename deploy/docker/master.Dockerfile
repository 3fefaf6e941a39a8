# The OpenAgent master: FastAPI app (HTTP API + WebSocket hub at /ws) on port 8000.
#
#   docker build -f deploy/docker/master.Dockerfile -t openagent/master:latest .
#   docker run --rm -p 8000:8000 -e REDIS_URL=redis://:PASSWORD@host.docker.internal:6379 openagent/master:latest
#
# Give Redis a password (redis-server --requirepass): agent code that reaches its port must not
# be able to use it.
#
# Build from the repository root (the context). Configuration comes from the environment
# (see .env.example); .env is kept out of the image by .dockerignore.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A numeric UID, so that Kubernetes can check runAsNonRoot without a runAsUser of its own.
RUN groupadd --system --gid 10001 openagent \
    && useradd --system --no-log-init --uid 10001 --gid openagent --create-home openagent

WORKDIR /app

# README.md is the package's readme in pyproject.toml, so setuptools needs it to build.
COPY pyproject.toml README.md ./
COPY protocol/ protocol/
COPY openagent/ openagent/
COPY master/ master/
# DL3013 (pin versions): this installs the project itself; its dependencies' ranges are in pyproject.toml.
# hadolint ignore=DL3013
RUN pip install --no-cache-dir '.[master]' \
    && rm -rf build ./*.egg-info

USER 10001:10001

EXPOSE 8000

# python:3.11-slim has no curl; GET /health needs no API key.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4).status == 200 else 1)"]

# python -m master: uvicorn with the server limits of the settings (OPENAGENT_WS_MAX_MESSAGE_BYTES
# is the WebSocket frame limit, so the server never buffers a larger frame).
CMD ["python", "-m", "master", "--host", "0.0.0.0", "--port", "8000"]
