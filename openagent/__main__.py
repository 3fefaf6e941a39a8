"""``python -m openagent``: the ``openagent`` command (see :mod:`openagent.cli`)."""

from openagent.cli import main

raise SystemExit(main())
