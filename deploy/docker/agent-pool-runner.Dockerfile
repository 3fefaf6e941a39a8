# The agent pool runner (openagent/agent-pool-runner:latest): one Pod that runs many agents,
# each as its own confined subprocess (openagent/pool_runner). The master's sandbox sends it
# agent code (placement "pool"); its HTTP API listens on 8080 (OPENAGENT_K8S_POOL_RUNNER_PORT)
# and needs the master's key as a bearer token (POOL_RUNNER_TOKEN, else OPENAGENT_API_KEY):
#
#   docker build -f deploy/docker/agent-pool-runner.Dockerfile -t openagent/agent-pool-runner:latest .
#   docker run --rm -p 8080:8080 -e OPENAGENT_API_KEY=... -e MASTER_WS=ws://host.docker.internal:8000/ws \
#       openagent/agent-pool-runner:latest
#
# Same base and user as the agent runtime, so module agents (sample_agents/, system_agents/,
# agents/) run here as they do in a Pod of their own.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app \
    POOL_RUNNER_HOST=0.0.0.0 \
    POOL_RUNNER_PORT=8080 \
    POOL_RUNNER_WORKDIR=/tmp/openagent-pool

# A numeric UID, so that Kubernetes can check runAsNonRoot without a runAsUser of its own.
RUN groupadd --system --gid 10001 openagent \
    && useradd --system --no-log-init --uid 10001 --gid openagent --create-home openagent

WORKDIR /app

# README.md is the package's readme in pyproject.toml, so setuptools needs it to build.
COPY pyproject.toml README.md ./
COPY protocol/ protocol/
COPY openagent/ openagent/
# DL3013 (pin versions): this installs the project itself; its dependencies' ranges are in pyproject.toml.
# hadolint ignore=DL3013
RUN pip install --no-cache-dir '.[invocation]' \
    && rm -rf build ./*.egg-info

COPY sample_agents/ sample_agents/
COPY system_agents/ system_agents/
COPY agents/ agents/

USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=3s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/health', timeout=2)"]

ENTRYPOINT ["python", "-m", "openagent.pool_runner"]
