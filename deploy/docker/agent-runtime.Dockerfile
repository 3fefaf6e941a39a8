# The agent runtime (openagent/agent-runtime:latest): the SDK with the `invocation` extra and
# the repository's agent folders (sample_agents/, system_agents/, agents/). The entrypoint is
# `python -m`, so the arguments name the module to run:
#
#   docker build -f deploy/docker/agent-runtime.Dockerfile -t openagent/agent-runtime:latest .
#   docker run --rm -e MASTER_WS=ws://host.docker.internal:8000/ws -e OPENAGENT_API_KEY=... \
#       openagent/agent-runtime:latest sample_agents.action_weather
#
# In Kubernetes, a Pod passes the module as `args` (deploy/k8s/weather-agent.yaml). This is
# also the image of the master's sandbox new_pod agents (OPENAGENT_K8S_AGENT_IMAGE).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app

# A numeric UID, so that Kubernetes can check runAsNonRoot without a runAsUser of its own.
RUN groupadd --system --gid 10001 openagent \
    && useradd --system --no-log-init --uid 10001 --gid openagent --create-home openagent

WORKDIR /app

# README.md is the package's readme in pyproject.toml, so setuptools needs it to build.
# master/ is not copied, so only protocol and openagent are installed (with the RAG agents' extra).
COPY pyproject.toml README.md ./
COPY protocol/ protocol/
COPY openagent/ openagent/
# DL3013 (pin versions): this installs the project itself; its dependencies' ranges are in pyproject.toml.
# hadolint ignore=DL3013
RUN pip install --no-cache-dir '.[invocation,rag]' \
    && rm -rf build ./*.egg-info

# The agents, importable as packages from /app (PYTHONPATH): python -m sample_agents.action_weather.
COPY sample_agents/ sample_agents/
COPY system_agents/ system_agents/
COPY agents/ agents/

USER 10001:10001

ENTRYPOINT ["python", "-m"]
CMD ["sample_agents.action_weather"]
