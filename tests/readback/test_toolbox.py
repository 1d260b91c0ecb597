"""The tools as an agent gets them: names, schemas, caps, a free event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
import typing
from pathlib import Path

import pytest
from readback_files import REST

from ctxoffload import DataBlock, TextBlock
from ctxoffload.exceptions import ConfigError
from ctxoffload.readback import FileToolbox, workspace_tools


class _Workspace:
    """Stands in for LocalWorkspace: all workspace_tools uses is `workdir`."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir


async def test_workspace_tools_are_named_typed_and_documented(root: Path) -> None:
    tools = workspace_tools(_Workspace(root))
    assert [tool.__name__ for tool in tools] == ["Read", "Grep", "Glob"]
    for tool in tools:
        assert inspect.iscoroutinefunction(tool)
        assert "Args:" in (tool.__doc__ or "")
    read, grep, glob = tools
    assert typing.get_type_hints(read) == {
        "path": str,
        "offset": int,
        "limit": int,
        "char_offset": int,
        "return": str | list[TextBlock | DataBlock],
    }
    assert typing.get_type_hints(grep) == {
        "pattern": str,
        "path_or_glob": str,
        "context_lines": int,
        "max_matches": int,
        "return": str,
    }
    assert inspect.signature(read).parameters["limit"].default == 200
    assert await read("notes.txt", 2, 1) == (
        "     2\tbeta\n… lines 2–2 of 3 shown; call Read with offset=3 to continue"
    )
    assert await grep("gamma", "notes.txt") == "notes.txt:3:gamma"
    assert await glob("sub/*.txt") == "sub/deep.txt"


async def test_workspace_tools_accept_a_directory_or_a_list(root: Path) -> None:
    for given in (root, str(root), [root, root.parent / "outside"]):
        read, _, _ = workspace_tools(given)
        assert (await read("notes.txt")).startswith("     1\talpha")


async def test_workspace_tools_pass_caps_through(root: Path) -> None:
    (root / "wide.txt").write_text("w" * 300 + "\n")
    read, _, _ = workspace_tools(root, max_line_chars=100, max_output_chars=1_000)
    cut = "… [line cut: 200 more characters]" + REST.format(1, 100)
    assert await read("wide.txt") == "     1\t" + "w" * 100 + cut


@pytest.mark.parametrize(
    "caps",
    [
        {"max_line_chars": 0},
        {"max_line_chars": 2_000, "max_output_chars": 2_100},
        {"max_glob_paths": 0},
        {"grep_timeout": 0},
    ],
)
def test_impossible_caps_are_config_errors(tmp_path: Path, caps: dict[str, typing.Any]) -> None:
    with pytest.raises(ConfigError):
        FileToolbox([tmp_path], **caps)


def test_toolbox_needs_a_root() -> None:
    with pytest.raises(ConfigError, match="at least one root"):
        FileToolbox([])


async def _off_the_loop(call: typing.Coroutine[object, object, object]) -> object:
    """Await `call`, checking it runs its work in a worker thread, not on the event loop.

    Counted, not timed: the loop's only worker is held busy first, so the call's work
    queues behind it; while it waits, the loop must go on running other tasks and the call
    must not finish. Then the worker is let go and the call's answer returned.
    """
    loop = asyncio.get_running_loop()
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(executor)
    release = threading.Event()
    holder = loop.run_in_executor(None, release.wait)
    task = asyncio.ensure_future(call)
    try:
        for _ in range(100):  # the loop runs other tasks meanwhile
            await asyncio.sleep(0)
        assert not task.done(), "the call ran its work on the event loop"
    finally:
        release.set()
    await holder
    return await asyncio.wait_for(task, timeout=300)  # a hang guard, not a measure


async def test_pathological_globs_and_regexes_keep_the_event_loop_running(root: Path) -> None:
    (root / ("a" * 60)).write_text("a" * 40 + "b\n")
    _read, grep, glob = workspace_tools(root)
    evil_glob = "*?" * 12 + "#"
    for call in (glob(evil_glob), grep("x", evil_glob), grep("(a+)+$", "a" * 60)):
        result = await _off_the_loop(call)
        assert isinstance(result, str) and result.startswith("No ")


def test_file_tools_are_marked_as_readers(tmp_path: Path) -> None:
    assert all(tool.ctxoffload_reader is True for tool in workspace_tools(tmp_path))  # type: ignore[attr-defined]
