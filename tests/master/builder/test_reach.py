"""``master.builder.reach``: imports and attribute paths are checked by the module they resolve to."""

from __future__ import annotations

import pytest

from master.builder.checks import static_checks
from tests.master.builder.samples import UNIT_CONVERTER

HANDLER = "async def handle_tool(tool_name: str, arguments: dict[str, Any]) -> Any:\n"

BYPASSES = [
    "import posix\nposix.system('id')",
    "import nt\nnt.system('id')",
    "from posix import system\nsystem('id')",
    "import posixpath\nposixpath.os.system('id')",
    "import _posixsubprocess",
    "from _posixsubprocess import fork_exec",
    "import importlib\nimportlib.import_module('os').system('id')",
    "from importlib import import_module\nimport_module('os')",
    "import importlib.util",
    "import builtins\nbuiltins.__import__('os').system('id')",
    "from builtins import __import__ as imp\nimp('os')",
    "import sys\nsys.modules['os'].system('id')",
    "import typing\ntyping.sys.modules['os'].system('id')",
    "import logging\nlogging.os.system('id')",
    "import tempfile\ntempfile._os.system('id')",
    "import ctypes\nctypes.CDLL(None).system(b'id')",
    "import ctypes.util",
    "import subprocess\nsubprocess.run(['id'])",
    "import asyncio.subprocess",
    "from asyncio import subprocess as sp\nsp.create_subprocess_exec('id')",
    "import asyncio\nasyncio.create_subprocess_exec('id')",
    "from asyncio import create_subprocess_shell\ncreate_subprocess_shell('id')",
    "import asyncio\nloop = asyncio.get_event_loop()\nloop.subprocess_exec(None, 'id')",
    "import asyncio as aio\nm = aio\nm.create_subprocess_shell('id')",
    "import asyncio\ngetattr(asyncio, 'subprocess').create_subprocess_exec('id')",
    "import asyncio\nname = 'subprocess'\ngetattr(asyncio, name)",
    "from concurrent.futures import ProcessPoolExecutor",
    "import concurrent.futures\nconcurrent.futures.ProcessPoolExecutor()",
    "import multiprocessing",
    "__import__('os').system('id')",
    "getattr(__builtins__, '__import__')('os')",
    "__builtins__['__import__']('os')",
    "import pkgutil\npkgutil.resolve_name('os:system')('id')",
    "import pydoc\npydoc.locate('os.system')('id')",
    "import runpy",
    "import inspect\ninspect.currentframe().f_globals",
    "import gc\ngc.get_objects()",
    "import timeit\ntimeit.timeit('import os')",
    "import logging.config",
    "import platform",
    "vars()['__builtins__']",
    "x = (lambda: 0).__globals__",
    "import shutil",
]
"""Ways to reach a process, the import machinery or the interpreter from generated code."""


def embed(snippet: str) -> str:
    """The unit converter with ``snippet`` run inside its tool handler (imports at module level)."""
    lines = snippet.split("\n")
    imports = [line for line in lines if line.startswith(("import ", "from "))]
    body = [line for line in lines if line not in imports] or ["pass"]
    source = UNIT_CONVERTER.replace("AGENT_ID = ", "\n".join(imports) + "\n\nAGENT_ID = ", 1)
    handler_body = "".join(f"    {line}\n" for line in body)
    return source.replace(HANDLER, HANDLER + handler_body, 1)


INNOCENT = [
    "import asyncio\nimport json\nimport math\nawait asyncio.sleep(0)\nx = json.dumps(math.pi)",
    "import functools\nimport operator\nx = functools.reduce(operator.add, [1, 2])",
    "import hashlib\nx = hashlib.sha256(b'x').hexdigest()",
    "import io\nbuffer = io.StringIO()",
    "import heapq\nheap = []\nheapq.heappush(heap, 1)",
    "import json\ntry:\n    json.loads('x')\nexcept json.JSONDecodeError:\n    pass",
    "import asyncio\nqueue = asyncio.Queue()",
    "from datetime import datetime, timezone\nx = datetime.now(timezone.utc).isoformat()",
    "from decimal import Decimal\nimport statistics\nx = statistics.mean([Decimal(1)])",
    "import re\nimport random\nimport uuid\nx = re.sub('a', 'b', str(uuid.uuid4()))\ny = random.randint(1, 2)",
    "from collections import Counter, deque\nimport itertools\nx = deque(itertools.chain([1], [2]))",
    "import httpx\nclient = httpx.AsyncClient()",
]
"""What tool handlers ordinarily do: none of it is refused."""


@pytest.mark.parametrize("snippet", INNOCENT)
def test_ordinary_standard_library_use_passes(snippet: str) -> None:
    report = static_checks(embed(snippet), transport="websocket")
    assert report.passed, [(check.name, check.detail) for check in report.failures()]


@pytest.mark.parametrize("snippet", BYPASSES)
def test_every_known_bypass_of_the_allow_list_is_refused(snippet: str) -> None:
    report = static_checks(embed(snippet), transport="websocket")
    failures = {check.name: check.detail for check in report.failures()}
    assert failures.keys() & {"imports", "restricted_calls"}, f"passed the checks: {snippet!r}"
    assert all("not allowed" in detail or "literal attribute name" in detail for detail in failures.values())
