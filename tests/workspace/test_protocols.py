"""Each workspace is exactly what it is declared to be: a `Workspace`, plus its capabilities.

Callers find a capability with `isinstance(ws, GarbageCollector)`, never by looking for a
method by name, so a backend that lost a method, or grew one it cannot honour, shows here.
(mypy checks the same declarations against the signatures: see the end of each backend.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ctxoffload import InMemoryWorkspace, LocalWorkspace, ObjectStoreWorkspace, SqlWorkspace
from ctxoffload._disk.scope import SessionScoped
from ctxoffload._doors.checks import not_a_capability
from ctxoffload.exceptions import ConfigError
from ctxoffload.workspace import (
    EventLog,
    GarbageCollector,
    ModelCallClock,
    Offloader,
    ReferenceReader,
    StateStore,
    Workspace,
)
from helpers import MinimalOffloader

PROTOCOLS: list[type] = [
    Offloader,
    ReferenceReader,
    EventLog,
    StateStore,
    Workspace,
    GarbageCollector,
    ModelCallClock,
]
EVERY_WORKSPACE = {Offloader, ReferenceReader, EventLog, StateStore, Workspace}

# Each backend, and the protocols it claims; it must satisfy none of the others.
BACKENDS: dict[str, tuple[Callable[[Path], object], set[type]]] = {
    "local": (lambda tmp: LocalWorkspace(tmp / "ws"), EVERY_WORKSPACE | {GarbageCollector}),
    "memory": (lambda tmp: InMemoryWorkspace(), EVERY_WORKSPACE | {ModelCallClock}),
    "objectstore": (
        lambda tmp: ObjectStoreWorkspace("memory://"),
        EVERY_WORKSPACE | {GarbageCollector},
    ),
    "sqlite": (
        lambda tmp: SqlWorkspace(f"sqlite:///{tmp / 'ws.db'}"),
        EVERY_WORKSPACE | {GarbageCollector},
    ),
}


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_backend_is_each_protocol_it_claims_and_no_other(
    backend: str, protocol: type, tmp_path: Path
) -> None:
    make, claims = BACKENDS[backend]
    workspace = make(tmp_path)
    assert isinstance(workspace, protocol) == (protocol in claims)
    refusal = not_a_capability(workspace, protocol, role="workspace", fix="-")
    assert ("has no , so" in str(refusal)) == (protocol in claims)


def test_a_custom_offloader_is_an_offloader_and_nothing_more() -> None:
    custom = MinimalOffloader()
    assert [p for p in PROTOCOLS if isinstance(custom, p)] == [Offloader]


def test_a_refusal_is_a_config_error_naming_what_to_add_in_declared_order() -> None:
    refusal = not_a_capability(object(), Offloader, role="offloader", fix="pass a LocalWorkspace")
    assert isinstance(refusal, ConfigError)
    assert str(refusal) == (
        "offloader object has no offload_context, offload_tool_result, offload_data_block, "
        "so it is not a ctxoffload Offloader: pass a LocalWorkspace"
    )
    # Workspace: what it extends first, then its own.
    refusal = not_a_capability(MinimalOffloader(), Workspace, role="workspace", fix="-")
    lacking = str(refusal).split(" has no ")[1].split(", so it")[0].split(", ")
    assert lacking[:3] == ["read_reference", "record_event", "read_events"]
    assert "offload_context" not in lacking and lacking[-1] == "purge_session"


@pytest.mark.parametrize(("given", "named"), [(None, "None"), (42, "42"), ("ws", "str")])
def test_what_has_nothing_of_a_workspace_is_refused_in_one_short_line(
    given: object, named: str
) -> None:
    """None, a number or a string has none of a Workspace's sixteen methods: the refusal names
    three and how many more, so that what to pass instead is read, not lost in a list."""
    refusal = str(not_a_capability(given, Workspace, role="workspace", fix="pass X"))
    assert refusal == (
        f"workspace {named} has no method of a ctxoffload Workspace (offload_context, "
        "offload_tool_result, offload_data_block and 13 more), so it is not a ctxoffload "
        "Workspace: pass X"
    )


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_every_backend_declares_that_it_can_keep_sessions_apart(
    backend: str, tmp_path: Path
) -> None:
    # The file tools and the Strands storage confine reads only to a `SessionScoped`.
    make, _ = BACKENDS[backend]
    assert isinstance(make(tmp_path), SessionScoped)
    assert not isinstance(MinimalOffloader(), SessionScoped)
