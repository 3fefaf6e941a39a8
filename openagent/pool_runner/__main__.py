"""``python -m openagent.pool_runner``: serve the pool runner until SIGTERM (see :mod:`.config`)."""

from __future__ import annotations

import logging
import sys

import uvicorn

from openagent.errors import ConfigurationError
from openagent.pool_runner.app import create_app
from openagent.pool_runner.config import PoolRunnerConfig
from openagent.pool_runner.launch import not_dumpable

logger = logging.getLogger("openagent.pool_runner")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Its environment holds its token: agents running as its own user (a non-root Pod) must not
    # read it from /proc/<pid>/environ.
    if not not_dumpable():
        logger.warning(
            "could not make the pool runner non-dumpable (not Linux?): agents of its user may read its environment"
        )
    try:
        config = PoolRunnerConfig.from_env()
    except ConfigurationError as exc:
        logger.error("%s", exc)
        sys.exit(2)
    logger.info(
        "pool runner on %s:%d (token %s, up to %d agents, work dir %s)",
        config.host,
        config.port,
        "on" if config.token else "OFF",
        config.max_agents,
        config.workdir,
    )
    uvicorn.run(create_app(config), host=config.host, port=config.port, log_level="warning")


if __name__ == "__main__":
    main()
