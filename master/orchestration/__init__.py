"""The LLM side of a query: which model, which prompt, and the tool-calling loop.

- :mod:`~master.orchestration.model_catalog`: the models a query may use (the spec's precedence rules).
- :mod:`~master.orchestration.prompts`: the system prompt of each prompt profile.
- :mod:`~master.orchestration.orchestrator`: one round or auto mode, tool calls through the dispatcher.
- :mod:`~master.orchestration.tool_runs`: one tool call of a round, checked, run and reported.
- :mod:`~master.orchestration.hooks`: how a run reports what it does (:class:`RunHooks`).
- :mod:`~master.orchestration.plans`: plans proposed by the model, approved and executed later.
- :mod:`~master.orchestration.roles`: auto mode as a coordinator of roles (planner, executor,
  reviewer, critic), a typed state machine.
- :mod:`~master.orchestration.budgets`: per-query limits on tool calls, tokens and seconds.

It talks to the model through :mod:`master.llm`, calls agents through :mod:`master.agents` and
stores nothing itself.
"""
