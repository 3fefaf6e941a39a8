"""``openagent.rag``: one front door, imported on first use, so the SDK and the master stay light."""

from __future__ import annotations

import subprocess
import sys

import pytest

import openagent.rag
from tests.factories import ROOT

HEAVY = ("redis", "numpy", "pypdf", "docx", "tiktoken")
"""What the ``rag`` extra brings; none of it may load before a RAG name is used."""


def _run(code: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr


def test_every_public_name_resolves_to_its_module() -> None:
    assert openagent.rag.__all__ == sorted(openagent.rag.__all__)
    for name in openagent.rag.__all__:
        value = getattr(openagent.rag, name)
        module = sys.modules[f"openagent.rag.{openagent.rag._LAZY[name]}"]
        assert getattr(module, name) is value, name


def test_importing_openagent_loads_no_rag_and_no_rag_dependency() -> None:
    _run(
        "import sys, openagent, openagent.cli\n"
        f"leaked = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} "
        "or m.startswith('openagent.rag'))\n"
        "assert not leaked, leaked\n"
    )


def test_the_format_check_needs_only_the_standard_library() -> None:
    """The master checks attachments with it; it must not pull in the RAG system."""
    _run(
        "import sys\n"
        "from openagent.rag import FormatMismatch, detect_format\n"
        f"leaked = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "assert not leaked, leaked\n"
        "assert detect_format(b'%PDF-1.7 ...', 'application/pdf', 'a.pdf') == 'pdf'\n"
    )


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        openagent.rag.Nope  # noqa: B018


def test_a_missing_extra_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # as if the extra were not installed
    for module in ("openagent.rag.store", "openagent.rag.embeddings"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ImportError, match=r"pip install 'openagent\[rag\]'"):
        openagent.rag.BruteForceStore  # noqa: B018
