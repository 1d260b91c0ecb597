"""A workspace given where a host framework's own store belongs (Haystack's
`ToolResultOffloadHook`, Strands' `ContextOffloader`) says so at the host's first question,
once, and names what to pass instead; any other name it lacks is Python's own error."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ctxoffload"]


def test_a_host_asking_for_its_store_is_told_once_what_to_pass(
    make_workspace: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    workspace = make_workspace()
    name = type(workspace).__name__
    with caplog.at_level(logging.WARNING, "ctxoffload"):
        # What Haystack's hook asks first, at a fresh result, and then calls.
        assert getattr(workspace, "supports_binary_content", False) is False
        with pytest.raises(AttributeError) as raised:
            workspace.write(key="1_fetch_c1.txt", content="a result")
        # What Strands' ContextOffloader asks when it is built.
        assert not hasattr(workspace, "store") and not hasattr(workspace, "retrieve")
    (warning,) = said(caplog)
    assert warning.startswith(f"{name} was given where a host's own store belongs")
    assert "WorkspaceResultStore(workspace, session_id=...)" in warning
    error = str(raised.value)
    assert error.startswith(f"'{name}' object has no attribute 'write': ")
    assert "WorkspaceResultStore(" in error and "WorkspaceStorage(" in error


def test_a_name_no_host_store_has_is_pythons_own_error(
    make_workspace: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    workspace = make_workspace()
    with caplog.at_level(logging.WARNING, "ctxoffload"):
        assert getattr(workspace, "no_such_name", None) is None
        with pytest.raises(AttributeError) as raised:
            workspace.no_such_name  # noqa: B018
    assert (
        str(raised.value) == f"'{type(workspace).__name__}' object has no attribute 'no_such_name'"
    )
    assert raised.value.name == "no_such_name" and raised.value.obj is workspace
    assert said(caplog) == []
