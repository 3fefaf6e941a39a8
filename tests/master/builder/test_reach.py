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
    # aliases of the built-ins that run code: named, not called
    "e = eval\ne('1')",
    "x = exec",
    "run = [compile][0]",
    "@eval\ndef f():\n    pass",
    "import functools\nfunctools.partial(exec, 'x')()",
    "x = list(map(eval, ['1']))",
    # attribute access through strings
    "getattr(handle_tool, 'eval')",
    "hasattr(handle_tool, '__globals__')",
    "import operator\noperator.attrgetter('__globals__')(handle_tool)",
    "import operator\nx = operator.attrgetter('x', '__code__.co_consts')",
    "import operator\nname = '__globals__'\noperator.attrgetter(name)",
    "import operator\noperator.methodcaller('system', 'id')",
    "from operator import attrgetter\nattrgetter('__globals__')",
    "x = '{0.__globals__}'.format(handle_tool)",
    "x = '{0.__init__.__globals__[__builtins__]}'.format(handle_tool)",
    "x = '{a:{b.__class__}}'.format_map({})",
    "import string\nstring.Formatter().get_field('0.__globals__', [handle_tool], {})",
    "import string\nfield = '0.__globals__'\nstring.Formatter().get_field(field, [handle_tool], {})",
    # evaluation hidden in typing and in string annotations
    'import typing\ntyping.ForwardRef("1")',
    "from typing import ForwardRef",
    "from typing import get_type_hints",
    "x: \"__import__('os').system('id')\" = 1",
    "def f(a: 'eval(\"1\")'):\n    pass",
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
    "x = '{0} and {1.real} {2[0]}'.format(1, 2, [3])",
    "x = '{:>{width}}'.format('a', width=3)",
    "import operator\nx = operator.attrgetter('name', 'value.real')",
    "import operator\nx = operator.methodcaller('upper')",
    "y: 'int' = 1",
    "from typing import Optional\nz: Optional[int] = None",
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


def test_a_coding_cookie_is_decoded_as_python_decodes_it() -> None:
    """A UTF-7 source shows one comment to a text check; Python, which reads the cookie, sees a
    second line (``+AAo-`` is a newline). The checks decode first and see what Python runs."""
    visible = embed("# harmless HIDDEN").encode("utf-7").decode("ascii")
    plain = "# -*- coding: utf-7 -*-\n" + visible.replace("HIDDEN", "")
    assert static_checks(plain, transport="websocket").passed  # the cookie itself is no fault
    hidden = "# -*- coding: utf-7 -*-\n" + visible.replace("HIDDEN", "+AAo-    x = eval('1')")
    failures = {check.name: check.detail for check in static_checks(hidden, transport="websocket").failures()}
    assert failures == {"restricted_calls": failures["restricted_calls"]}
    assert "eval() is not allowed" in failures["restricted_calls"]


def test_a_source_that_python_cannot_decode_does_not_parse() -> None:
    broken = "# -*- coding: utf-7 -*-\n" + embed("x = 1 +AAo")  # an unfinished UTF-7 shift
    (check,) = static_checks(broken, transport="websocket").checks
    assert check.name == "parses" and not check.passed
    assert "cannot be decoded as Python reads the file" in check.detail
