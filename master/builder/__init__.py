"""The agent builder: generate agent code with the LLM, check it, save it, and discover agent modules.

- :mod:`master.builder.analysis` reads an agent module's source statically (ast, no import);
- :mod:`master.builder.discovery` lists ``system_agents/`` then ``agents/`` for the UI;
- :mod:`master.builder.checks` and :mod:`master.builder.smoke` check generated code;
- :mod:`master.builder.files` saves and reads modules under the allowed folders only;
- :mod:`master.builder.generator` asks the LLM (:mod:`master.llm`) for an agent module;
- :mod:`master.builder.workspaces` exports, restores and runs workspaces, reading the agents
  through the :class:`~master.agents.directory.AgentDirectory`;
- :mod:`master.builder.service` holds them all, built once in the lifespan.
"""
