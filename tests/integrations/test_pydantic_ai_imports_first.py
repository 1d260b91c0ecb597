"""Every public name of `ctxoffload.integrations.pydantic_ai` imports first in a fresh interpreter
where pydantic-ai is installed, and importing the module imports none of pydantic-ai
(tests/test_module_graph.py checks the rest of the package)."""

from __future__ import annotations

import json
import subprocess
import sys

from frameworks import require_framework

from helpers import first_import_failures, public_names

require_framework("pydantic_ai", "pydantic_ai")


def test_every_public_name_imports_first() -> None:
    names = public_names("ctxoffload.integrations.pydantic_ai")
    assert names
    assert first_import_failures(names) == {}


def test_importing_the_module_imports_no_pydantic_ai() -> None:
    code = (
        "import json, sys, ctxoffload.integrations.pydantic_ai\n"
        "print(json.dumps([m for m in sys.modules if m.startswith('pydantic_ai')]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
