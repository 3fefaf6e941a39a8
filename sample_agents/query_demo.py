"""Query agent demo: asks the orchestrator a few questions over the WebSocket.

Run it while the master and the weather agent are up (``scripts/run.sh``)::

    PYTHONPATH=. python sample_agents/query_demo.py

It asks for the weather in Paris, follows up in the same session, asks a question the
orchestrator answers directly, then (when ``sample_agents/demo_invocation_agent.py`` runs too)
exercises the HTTP invocation tools ``echo``, ``get_time`` and ``long_task``, whose progress
shows in the master's log and at ``GET /tool_progress/{call_id}``. It prints each answer and
the agents that were used.
Exit status: 0 when every query succeeded, 1 when one failed, 2 when the master is unreachable
or refused the connection.
"""

from __future__ import annotations

import asyncio
import sys

from openagent import ConfigurationError, QueryClient, QueryError, QueryResult, TransportError

AGENT_ID = "query-demo"


def show(question: str, result: QueryResult) -> bool:
    """Print one exchange; return whether it succeeded."""
    print(f"\n> {question}")
    if result.success:
        print(result.answer or "(empty answer)")
    else:
        code = f" [{result.error_code}]" if result.error_code else ""
        print(f"query failed{code}: {result.error}")
    used = ", ".join(f"{used.agent_id}.{used.tool_name}" for used in result.agents_used)
    print(f"  agents used: {used or 'none (answered directly)'}")
    print(f"  session: {result.session_id}")
    return result.success


async def ask(client: QueryClient, question: str, session_id: str | None = None) -> QueryResult | None:
    """Send one query; print a refusal by the master and return ``None`` for it."""
    try:
        result = await client.query(question, session_id=session_id)
    except QueryError as exc:
        print(f"\n> {question}\nquery refused: {exc}")
        return None
    show(question, result)
    return result


async def main() -> int:
    try:
        client = QueryClient(AGENT_ID)
    except ConfigurationError as exc:
        print(f"bad configuration: {exc}", file=sys.stderr)
        return 2
    try:
        async with client:
            first = await ask(client, "What's the weather in Paris?")
            follow_up = await ask(
                client,
                "And how does that compare to yesterday?",
                session_id=first.session_id if first else None,
            )
            direct = await ask(client, "In one sentence: what does an orchestrator agent do?")
            invocation = [
                await ask(client, question)
                for question in (
                    "Echo back the words 'hello invocation agent'.",
                    "What time is it in Tokyo right now?",
                    "Run the long task with 4 steps of 1 second each and tell me how it went.",
                )
            ]
    except TransportError as exc:
        print(
            f"cannot talk to the master at {client.config.master_ws}: {exc}\n"
            "Is it running (scripts/run.sh)? Do MASTER_WS and OPENAGENT_API_KEY match it?",
            file=sys.stderr,
        )
        return 2
    ok = all(result is not None and result.success for result in (first, follow_up, direct, *invocation))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
