"""A master with the sandbox off never loads the Kubernetes client (a heavy import at every start)."""

from __future__ import annotations

import subprocess
import sys

from tests.factories import ROOT

CHECK = """
import sys
from master.sandbox import create_sandbox
from master.settings import Settings
create_sandbox(Settings(openagent_k8s_sandbox=False), None, None, None)
print(sorted(name for name in sys.modules if name.split(".")[0] == "kubernetes"))
"""


def test_the_sandbox_off_imports_no_kubernetes_client() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
