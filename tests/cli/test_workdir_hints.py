"""What a first-time user gets for a --workdir that is not a workspace: the demo's folder
beside it named, a mistyped scheme said as a typo (the known schemes named, no Python advice),
a `memory://` store said to live in its own process, and `--help` naming database URLs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def make_workspace(folder: Path) -> Path:
    (folder / "sessions").mkdir(parents=True)
    return folder


def test_ls_where_the_demo_ran_names_the_demos_folder(
    tmp_path: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_workspace(tmp_path / "ctxoffload-demo-20261125-090000")
    make_workspace(tmp_path / "ctxoffload-demo-20261126-081723")
    (tmp_path / "notes").mkdir()
    elsewhere = cli("ls", "--workdir", tmp_path)
    assert f"pass --workdir {tmp_path / 'ctxoffload-demo-20261126-081723'}\n" in elsewhere.err
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CTXOFFLOAD_WORKDIR", raising=False)
    result = cli("ls")
    assert result.code == 2 and result.out == ""
    assert result.err.endswith(
        "ctxoffload-demo-20261126-081723 in it is one: pass --workdir "
        "ctxoffload-demo-20261126-081723\n"
    ), result.err


def test_a_workspace_inside_is_named_a_link_is_not(tmp_path: Path, cli: Callable[..., Any]) -> None:
    outside = make_workspace(tmp_path / "outside")
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "linked").symlink_to(outside)
    result = cli("ls", "--workdir", tmp_path / "here")
    assert result.code == 2 and "in it is one" not in result.err and "--workdir DIR" in result.err
    make_workspace(tmp_path / "here" / "agent_workspace")
    result = cli("ls", "--workdir", tmp_path / "here")
    assert "agent_workspace in it is one" in result.err


@pytest.mark.parametrize(
    "command", [["ls"], ["show"], ["grep", "x"], ["watch"], ["gc", "--older-than", "1d"]]
)
def test_a_mistyped_scheme_is_said_as_a_typo(
    tmp_path: Path, cli: Callable[..., Any], command: list[str]
) -> None:
    result = cli(*command, "--workdir", "sqlit:///a.db")
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert "no workspace has the scheme 'sqlit' (did you mean 'sqlite:///a.db'?)" in result.err
    assert "sqlite://, postgresql://" in result.err and "s3://" in result.err
    assert "LocalWorkspace" not in result.err and "object store" not in result.err
    assert not (tmp_path / "a.db").exists()


def test_a_memory_store_is_said_to_live_in_its_own_process(cli: Callable[..., Any]) -> None:
    for command in (["ls"], ["show"], ["stats"]):
        result = cli(*command, "--workdir", "memory:///x")
        assert result.code == 2 and result.out == ""
        assert "a memory:// store lives only in the process that made it" in result.err


def test_the_help_names_database_urls_for_the_workdir(cli: Callable[..., Any]) -> None:
    said = " ".join(cli("--help").out.split())
    assert "a database URL (sqlite:///agents.db, postgresql://user@host/db)" in said


@pytest.mark.parametrize(
    "url",
    ["postgress://agent:Zq7-pw@db/agents", "s4://bucket/p?token=Zq7-tok", "sqlite://u:Zq7-pw@h/a"],
)
def test_a_workdir_url_that_is_refused_is_named_without_its_password(
    cli: Callable[..., Any], url: str
) -> None:
    result = cli("ls", "--workdir", url)
    assert result.code == 2 and "***" in result.err, result.err
    assert "Zq7" not in result.err + result.out
