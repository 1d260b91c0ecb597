"""Every public name of `ctxoffload.integrations.crewai` imports first in a fresh interpreter
where CrewAI is installed, and importing the module imports none of CrewAI
(tests/test_module_graph.py checks the rest of the package)."""

from __future__ import annotations

import json
import subprocess
import sys

import crewai_scripted  # noqa: F401 (imports CrewAI quietly, or skips where it is missing)

from helpers import first_import_failures, public_names


def test_every_public_name_imports_first() -> None:
    names = public_names("ctxoffload.integrations.crewai")
    assert names
    assert first_import_failures(names) == {}


def test_importing_the_module_imports_no_crewai() -> None:
    code = (
        "import json, sys, ctxoffload.integrations.crewai\n"
        "crewai = [m for m in sys.modules if m == 'crewai' or m.startswith('crewai.')]\n"
        "print(json.dumps(crewai))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
