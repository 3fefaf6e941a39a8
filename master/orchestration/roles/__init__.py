"""Auto mode as a coordinator of roles (``roles`` in a query, or the ``roles`` prompt profile).

A planner splits the question into sub-tasks with acceptance criteria (``submit_plan``), the
executor runs each sub-task with the agents' tools (the orchestrator's loop, approvals and
budgets as everywhere), a reviewer judges each result (``submit_review``: ``pass``, ``fail``,
``needs_retry``) and an optional critic gives a second opinion whose disagreement waits for a
person. :mod:`.state` holds the typed state, :mod:`.tools` the role tools and prompts,
:mod:`.coordinator` the state machine; the query service persists the state after every
transition (:mod:`master.runs.roles`).
"""

from master.orchestration.roles.coordinator import Coordinator, RoleHost
from master.orchestration.roles.state import CoordinatorState, Phase, ReviewVerdict, Subtask

__all__ = ["Coordinator", "CoordinatorState", "Phase", "ReviewVerdict", "RoleHost", "Subtask"]
