"""The ``__getattr__`` of a package whose public names load their module on first use."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, modules: Mapping[str, str], extra: str) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package``: each name of ``modules`` (name → module of
    the package defining it) is imported on first use; a missing dependency names the extra that
    brings it (``pip install 'openagent[extra]'``)."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            loaded = importlib.import_module(f"{package}.{module}")
        except ImportError as exc:
            raise ImportError(
                f"{package}.{name} needs the {extra!r} extra: pip install 'openagent[{extra}]' "
                f"(missing: {exc.name or exc})"
            ) from exc
        return getattr(loaded, name)

    return __getattr__
