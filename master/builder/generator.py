"""``POST /generate-agent``: the master's LLM writes an agent module from a description, and it is checked.

The model gets the template for the asked transport (the collaboration-aware one when
``requires_collaboration``) and the request, and answers with one Python code block.
The code then goes through :func:`master.builder.checks.check_source`. When a check
fails, or the answer holds no code, the model is told what failed and tries once more;
if the second answer still fails, :class:`~master.errors.GenerationFailed` carries the
code and the failed checks rather than pretending it worked.
"""

from __future__ import annotations

import ast
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from master.builder.checks import Check, CheckReport, check_source
from master.builder.templates import Transport, render
from master.errors import GenerationFailed
from master.llm.model import ChatMessage, ChatModel
from openagent.agent_modules import is_module_name

logger = logging.getLogger("master.builder.generator")

ATTEMPTS = 2
"""The first answer and one retry with the failed checks fed back."""

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_MODULE_LINE = re.compile(r"^#\s*module:\s*(\S.*?)\s*$", re.MULTILINE)

SYSTEM_PROMPT = """\
You write agent modules for OpenAgent, a hub where an orchestrator LLM calls tools of agents.
Answer with exactly one ```python code block holding the whole module, and nothing else.
Fill in this template; keep its names (AGENT_ID, TOOLS, handle_tool, build_agent{collab}):

```python
{template}```

Rules:
- The first line is `# module: {module}`; AGENT_ID is "{agent_id}".
- Import only `openagent`, `protocol`, the standard library (not os, sys, subprocess, importlib, \
pickle, ctypes, shutil, signal) and, if needed, httpx or pydantic.
- TOOLS is a literal list of ToolSchema(...) with a description and an object JSON Schema as parameters.
- handle_tool validates its arguments, raises ToolError with a clear message on bad input and \
returns JSON-serialisable data. No exec, eval, open or dunder attributes.
- Nothing runs at import time except definitions.
"""


@dataclass(frozen=True)
class GenerationRequest:
    """What ``POST /generate-agent`` asks for (validated by the route)."""

    name: str
    description: str
    agent_type: Literal["action", "query"] = "action"
    transport: Transport = "websocket"
    model: str = ""
    tools: Sequence[str] = ()
    requires_collaboration: bool = False


@dataclass(frozen=True)
class GeneratedAgent:
    """Code that passed every check."""

    module: str
    agent_id: str
    source: str
    transport: str
    tools: list[dict[str, Any]]
    checks: list[Check]
    model: str
    attempts: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "agent_id": self.agent_id,
            "source": self.source,
            "transport": self.transport,
            "tools": self.tools,
            "checks": [check.as_dict() for check in self.checks],
            "model": self.model,
            "attempts": self.attempts,
        }


def module_name_for(name: str) -> str:
    """``"Unit Converter"`` → ``unit_converter`` (a valid module name, or ``agent`` as a last resort)."""
    slug = re.sub(r"[^0-9a-zA-Z]+", "_", name).strip("_").lower()
    if not slug or slug[0].isdigit():
        slug = f"agent_{slug}".rstrip("_")
    slug = slug[:60]
    return slug if is_module_name(slug) else "agent"


def agent_id_for(module: str) -> str:
    return module.replace("_", "-")


def extract_code(text: str | None) -> str | None:
    """The Python code of an answer: its longest fenced block, or the whole text if it is code."""
    if not text:
        return None
    blocks: list[str] = [block for block in _FENCE.findall(text) if block.strip()]
    if blocks:
        return max(blocks, key=len).strip() + "\n"
    stripped = text.strip()
    if "import" not in stripped or "def " not in stripped:
        return None
    try:
        ast.parse(stripped)
    except SyntaxError:
        return None
    return stripped + "\n"


def _module_check(source: str, default: str) -> tuple[str, Check]:
    """The module name the code declares on its ``# module:`` line (``default`` when none)."""
    found = _MODULE_LINE.search(source)
    if found is None:
        return default, Check("module_name", True, f"{default} (from the request's name)")
    declared = found.group(1)
    if not is_module_name(declared):
        return default, Check(
            "module_name", False, f"declared module name {declared!r} is not a Python identifier"
        )
    return declared, Check("module_name", True, declared)


def _feedback(checks: Sequence[Check]) -> str:
    failed = "\n".join(f"- {check.name}: {check.detail}" for check in checks if not check.passed)
    return (
        "The module failed these checks:\n"
        f"{failed}\n"
        "Fix every one and answer again with the whole module in one ```python code block."
    )


class AgentGenerator:
    """Writes agent modules with a :class:`ChatModel` and checks them."""

    def __init__(self, llm: ChatModel, *, smoke_timeout: float = 20.0) -> None:
        self.llm = llm
        self.smoke_timeout = smoke_timeout

    async def generate(self, request: GenerationRequest) -> GeneratedAgent:
        """Generate, check, retry once with the failures; raises ``GenerationFailed`` or ``LLMError``."""
        module = module_name_for(request.name)
        agent_id = agent_id_for(module)
        messages: list[ChatMessage] = [
            {
                "role": "system",
                "content": SYSTEM_PROMPT.format(
                    template=render(
                        request.transport,
                        requires_collaboration=request.requires_collaboration,
                        module=module,
                        agent_id=agent_id,
                        title=request.name,
                        description=request.description,
                    ),
                    module=module,
                    agent_id=agent_id,
                    collab=", handle_collaboration" if request.requires_collaboration else "",
                ),
            },
            {"role": "user", "content": json.dumps(self._brief(request), indent=2)},
        ]
        source = ""
        checks: list[Check] = []
        for attempt in range(1, ATTEMPTS + 1):
            # A module can be longer than a round's answer (OPENAGENT_LLM_MAX_TOKENS): no bound.
            result = await self.llm.complete(
                model=request.model, messages=messages, options={"max_tokens": None}
            )
            code = extract_code(result.content)
            messages.append({"role": "assistant", "content": result.content or ""})
            if code is None:
                source, checks = "", [Check("contains_code", False, "the answer held no Python code block")]
                logger.info("generator attempt %d for %s: no code", attempt, module)
                messages.append(
                    {
                        "role": "user",
                        "content": "Your answer held no code. Answer with the whole module in one ```python code block.",
                    }
                )
                continue
            source = code
            declared, module_check = _module_check(code, module)
            report = await self._check(code, declared, request)
            checks = [module_check, *report.checks]
            if all(check.passed for check in checks):
                assert report.agent is not None and report.agent.agent_id is not None
                return GeneratedAgent(
                    module=declared,
                    agent_id=report.agent.agent_id,
                    source=code,
                    transport=report.agent.transport,
                    tools=report.agent.tools,
                    checks=checks,
                    model=request.model,
                    attempts=attempt,
                )
            logger.info(
                "generator attempt %d for %s failed: %s",
                attempt,
                module,
                ", ".join(check.name for check in checks if not check.passed),
            )
            messages.append({"role": "user", "content": _feedback(checks)})
        if not source:
            raise GenerationFailed(
                "no_code",
                f"the model answered with prose instead of code, {ATTEMPTS} times",
                source="",
                module=module,
                checks=[check.as_dict() for check in checks],
            )
        failed = [check.name for check in checks if not check.passed]
        raise GenerationFailed(
            "checks_failed",
            f"the generated code still fails {', '.join(failed)} after {ATTEMPTS} attempts",
            source=source,
            module=module,
            checks=[check.as_dict() for check in checks],
        )

    async def _check(self, code: str, module: str, request: GenerationRequest) -> CheckReport:
        return await check_source(
            code,
            module,
            transport=request.transport,
            tool_hints=request.tools,
            requires_collaboration=request.requires_collaboration,
            smoke_timeout=self.smoke_timeout,
        )

    @staticmethod
    def _brief(request: GenerationRequest) -> dict[str, Any]:
        brief: dict[str, Any] = {
            "name": request.name,
            "description": request.description,
            "agent_type": request.agent_type,
            "transport": request.transport,
        }
        if request.tools:
            brief["tools"] = list(request.tools)
        if request.requires_collaboration:
            brief["requires_collaboration"] = True
        return brief
