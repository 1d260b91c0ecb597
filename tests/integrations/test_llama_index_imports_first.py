"""Every public name of `ctxoffload.integrations.llama_index` imports first in a fresh interpreter
where LlamaIndex is installed, and importing the module imports none of LlamaIndex
(tests/test_module_graph.py checks the rest of the package)."""

from __future__ import annotations

import json
import subprocess
import sys

from frameworks import require_framework

from helpers import first_import_failures, public_names

require_framework("llama_index.core", "llama_index")


def test_every_public_name_imports_first() -> None:
    names = public_names("ctxoffload.integrations.llama_index")
    assert names
    assert first_import_failures(names) == {}


def test_importing_the_module_imports_no_llama_index() -> None:
    code = (
        "import json, sys, ctxoffload.integrations.llama_index\n"
        "found = [m for m in sys.modules if m.startswith('llama_index')]\n"
        "print(json.dumps(found))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
