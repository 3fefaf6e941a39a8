"""MkDocs hooks of the documentation site (``hooks:`` in ``mkdocs.yml``); local code, nothing fetched.

- ``<!-- public-api: openagent -->`` in a page becomes one mkdocstrings block per name of that
  module's ``__all__``, so the SDK reference renders the names users import
  (``openagent.QueryClient``), never internal module paths, and follows ``__all__`` by itself.
- The SDK's docstrings use Sphinx roles (``:class:`QueryClient```), which Markdown leaves as
  text: the rendered pages keep the code and drop the role.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

_MARKER = re.compile(r"<!-- public-api: ([\w.]+) -->")
_ROLE = re.compile(r":(?:class|func|meth|mod|attr|exc|data|obj):(?=<code>)")
_TILDE = re.compile(r"<code>~(?:[\w]+\.)*([\w]+)</code>")
_OPTIONS = """    options:
      show_root_heading: true
      show_root_full_path: true
      heading_level: 2
"""


def _blocks(match: re.Match[str]) -> str:
    module = importlib.import_module(match.group(1))
    names: list[str] = sorted(module.__all__, key=str.lower)
    return "\n".join(f"::: {module.__name__}.{name}\n{_OPTIONS}" for name in names)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return _MARKER.sub(_blocks, markdown)


def on_page_content(html: str, **kwargs: Any) -> str:
    return _TILDE.sub(r"<code>\1</code>", _ROLE.sub("", html))
