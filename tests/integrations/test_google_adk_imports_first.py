"""Every public name of `ctxoffload.integrations.google_adk` imports first in a fresh interpreter
where Google ADK is installed, and importing the module imports none of Google ADK
(tests/test_module_graph.py checks the rest of the package)."""

from __future__ import annotations

import json
import subprocess
import sys

from frameworks import require_framework

from helpers import first_import_failures, public_names

require_framework("google.adk", "google_adk")


def test_every_public_name_imports_first() -> None:
    names = public_names("ctxoffload.integrations.google_adk")
    assert names
    assert first_import_failures(names) == {}


def test_importing_the_module_imports_no_adk() -> None:
    code = (
        "import json, sys, ctxoffload.integrations.google_adk\n"
        "adk = [m for m in sys.modules if m.startswith(('google.adk', 'google.genai'))]\n"
        "print(json.dumps(adk))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
