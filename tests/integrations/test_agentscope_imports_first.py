"""Every public name of `ctxoffload.integrations.agentscope` imports first in a fresh interpreter
where AgentScope is installed (tests/test_module_graph.py checks the rest of the package)."""

from __future__ import annotations

from frameworks import require_framework

from helpers import first_import_failures, public_names

require_framework("agentscope", "agentscope")


def test_every_public_name_imports_first() -> None:
    names = public_names("ctxoffload.integrations.agentscope")
    assert names
    assert first_import_failures(names) == {}
