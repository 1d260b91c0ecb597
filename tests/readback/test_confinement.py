"""The read-back tools reach nothing outside their roots: escapes, links, races, hard links."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from readback_files import SECRET

from ctxoffload.exceptions import ToolError
from ctxoffload.readback import FileToolbox, resolve_in_roots

HOSTILE_PATHS = [
    "../outside/secret.txt",
    "../../../../../../../../etc/passwd",
    "/etc/passwd",
    "sub/../../outside/secret.txt",
    "./../outside/secret.txt",
    "..",
    "/",
    "link_out",
    "link_dir_out/secret.txt",
    "chain",
    "sub/link_up/secret.txt",
    "../ws2/secret.txt",
    "sub/../../ws/../outside/secret.txt",
    "{outside}/secret.txt",
    "{root}/../outside/secret.txt",
    "{root}2/secret.txt",
]


def _hostile(template: str, root: Path) -> str:
    return template.format(root=root, outside=root.parent / "outside")


@pytest.mark.parametrize("template", HOSTILE_PATHS)
def test_resolve_in_roots_refuses_escapes(root: Path, template: str) -> None:
    with pytest.raises(ToolError, match="outside the allowed roots") as caught:
        resolve_in_roots(_hostile(template, root), [root])
    assert str(root.resolve()) in str(caught.value)


@pytest.mark.parametrize("template", HOSTILE_PATHS)
def test_read_returns_error_text_for_escapes(
    toolbox: FileToolbox, root: Path, template: str
) -> None:
    result = toolbox.read(_hostile(template, root))
    assert result.startswith("Error:")
    assert str(root.resolve()) in result
    assert SECRET not in result


@pytest.mark.parametrize("template", HOSTILE_PATHS)
def test_grep_returns_error_text_for_escapes(
    toolbox: FileToolbox, root: Path, template: str
) -> None:
    result = toolbox.grep("SECRET", _hostile(template, root))
    assert result.startswith("Error:")
    assert SECRET not in result


def test_resolve_in_roots_accepts_paths_inside(root: Path) -> None:
    notes = (root / "notes.txt").resolve()
    assert resolve_in_roots("notes.txt", [root]) == notes
    assert resolve_in_roots(str(notes), [root]) == notes
    assert resolve_in_roots("sub/../notes.txt", [root]) == notes
    assert resolve_in_roots(f"{root}/../ws/notes.txt", [root]) == notes
    assert resolve_in_roots(".", [root]) == root.resolve()
    assert resolve_in_roots("not-yet-written.txt", [root]) == root.resolve() / "not-yet-written.txt"


def test_resolve_in_roots_follows_symlinks_that_stay_inside(root: Path) -> None:
    assert resolve_in_roots("link_in", [root]) == (root / "notes.txt").resolve()


def test_resolve_in_roots_refuses_nul_byte(root: Path) -> None:
    with pytest.raises(ToolError, match="NUL"):
        resolve_in_roots("notes.txt\0../../etc/passwd", [root])


def test_resolve_in_roots_needs_a_root() -> None:
    with pytest.raises(ToolError, match="no roots"):
        resolve_in_roots("notes.txt", [])


def test_absolute_path_in_a_second_root_is_allowed(root: Path) -> None:
    other = root.parent / "outside"
    toolbox = FileToolbox([root, other])
    assert SECRET in toolbox.read(str(other / "secret.txt"))
    # Relative paths still start at the first root only.
    assert toolbox.read("secret.txt").startswith("Error: no such file")


def test_symlink_loop_is_an_error_not_a_hang(root: Path) -> None:
    (root / "loop_a").symlink_to(root / "loop_b")
    (root / "loop_b").symlink_to(root / "loop_a")
    assert FileToolbox([root]).read("loop_a").startswith("Error:")


def test_reference_relative_to_the_current_directory_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A LocalWorkspace with a relative workdir returns references like
    # "agent_workspace/sessions/s/tool_result-x.txt"; the tools must open those as given.
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "agent_workspace" / "sessions" / "s" / "tool_result-x.txt"
    target.parent.mkdir(parents=True)
    target.write_text("alpha\nERROR beta\n")
    roots = ["agent_workspace"]
    assert resolve_in_roots("agent_workspace/sessions/s/tool_result-x.txt", roots) == target
    assert resolve_in_roots("sessions/s/tool_result-x.txt", roots) == target
    with pytest.raises(ToolError):
        resolve_in_roots("../outside.txt", roots)


@pytest.mark.parametrize("pattern", ["../*", "../outside/*", "/etc/*", "/*", "link_dir_out/*"])
def test_glob_refuses_patterns_outside_the_roots(toolbox: FileToolbox, pattern: str) -> None:
    result = toolbox.glob(pattern)
    assert result.startswith("Error:")
    assert "secret" not in result


@pytest.mark.parametrize("pattern", ["../outside/*", "/etc/pass*", "link_dir_out/*.txt"])
def test_grep_refuses_globs_outside_the_roots(toolbox: FileToolbox, pattern: str) -> None:
    result = toolbox.grep("SECRET", pattern)
    assert result.startswith("Error:")
    assert SECRET not in result


_SWAPPER = """
import os, sys, time
victim, outside = sys.argv[1], sys.argv[2]
link, plain = victim + ".link", victim + ".plain"
print("ready", flush=True)
while True:  # until killed
    os.symlink(outside, link)
    os.rename(link, victim)
    time.sleep(0.0005)
    with open(plain, "w") as file:
        file.write("harmless line\\n")
    os.rename(plain, victim)
    time.sleep(0.0005)
"""


@pytest.mark.slow
def test_a_file_swapped_for_an_outside_symlink_is_never_read(root: Path) -> None:

    victim = root / "sub" / "victim.txt"
    victim.write_text("harmless line\n")
    outside = root.parent / "outside" / "secret.txt"
    toolbox = FileToolbox([root])
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(victim), str(outside)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        results: list[str] = []
        # Rounds until the race has been seen both ways (the file read, and refused as a
        # link) and some more: counted, not timed. The deadline is a safety net for a machine
        # so loaded that the swapper never runs.
        deadline = time.monotonic() + 300
        rounds = 0
        while rounds < 200 or not (
            any("harmless line" in r for r in results) and any("Error:" in r for r in results)
        ):
            assert time.monotonic() < deadline, f"after {rounds} rounds: {results[-4:]}"
            rounds += 1
            results.append(toolbox.read("sub/victim.txt"))
            results.append(toolbox.grep("TOP|harmless", "sub/victim.txt"))
            results.append(toolbox.grep("TOP|harmless", "sub"))
            results.append(toolbox.grep("TOP|harmless", "sub/*.txt"))
            assert not [result for result in results[-4:] if SECRET in result]
    finally:
        swapper.kill()
        swapper.wait()
        swapper.stdout.close()


def test_a_hard_link_to_an_outside_file_is_refused(root: Path) -> None:
    os.link(root.parent / "outside" / "secret.txt", root / "sub" / "hard.txt")
    toolbox = FileToolbox([root])
    read = toolbox.read("sub/hard.txt")
    assert read.startswith("Error: 'sub/hard.txt' has 2 hard links")
    assert SECRET not in read
    assert SECRET not in toolbox.grep("SECRET", "sub/hard.txt")
    walked = toolbox.grep("SECRET", ".")
    assert SECRET not in walked
    assert "hard links" in walked


def _held_open(path: Path) -> bool:
    """Whether this process has `path` open (its descriptors, read from /proc)."""
    wanted = str(path)
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == wanted:
                return True
        except OSError:  # closed meanwhile
            continue
    return False


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to see open files")
def test_a_second_link_that_goes_while_the_tool_looks_again_is_no_refusal(root: Path) -> None:
    # The workspace puts a tool_result in place by linking it under its name, then removing
    # its temporary name: for that moment the file has two links. Here the temporary name
    # goes 3 ms after the tool has the file open (a tool that looks once refuses it by then),
    # well within the 20 ms the workspace's readers look again.
    target = (root / "sub" / "tool_result-c1.txt").resolve()
    target.write_text("the whole output\n")
    temporary = target.with_name(".tool_result-c1.txt.tmp")
    toolbox = FileToolbox([root])

    def remove_when_opened(done: threading.Event) -> None:
        while not done.is_set() and not _held_open(target):
            time.sleep(0.0001)
        time.sleep(0.003)
        os.unlink(temporary)

    def attempts(read: Callable[[], object]) -> list[str]:
        results: list[str] = []
        for _ in range(3):  # a busy machine may hold the remover past 20 ms once
            os.link(target, temporary)
            done = threading.Event()
            remover = threading.Thread(target=remove_when_opened, args=(done,))
            remover.start()
            try:
                results.append(str(read()))
            finally:
                done.set()
                remover.join()
            if "the whole output" in results[-1]:
                break
        return results

    read = attempts(lambda: toolbox.read("sub/tool_result-c1.txt"))
    assert "the whole output" in read[-1], read
    grep = attempts(lambda: toolbox.grep("whole", "sub/tool_result-c1.txt"))
    assert "the whole output" in grep[-1], grep
    # A second link that stays is still refused.
    os.link(target, temporary)
    assert toolbox.read("sub/tool_result-c1.txt").startswith(
        "Error: 'sub/tool_result-c1.txt' has 2 hard links"
    )


_NO_FDS = """
import os, resource, sys
from ctxoffload.readback import FileToolbox
toolbox = FileToolbox([sys.argv[1]])
toolbox.grep("x", "notes.txt")  # load every module (RE2 too) before the descriptors run out
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = []
while True:  # take every descriptor that is left
    try:
        held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        break
for result in (toolbox.grep("x", "."), toolbox.grep("x", "*.txt"), toolbox.glob("**/*.txt"),
               toolbox.grep("x", "notes.txt"), toolbox.read("notes.txt")):
    print(result.splitlines()[0])
"""


def test_with_no_file_descriptors_left_the_tools_say_so(root: Path) -> None:

    completed = subprocess.run(
        [sys.executable, "-c", _NO_FDS, str(root)], capture_output=True, text=True, check=True
    )
    results = completed.stdout.splitlines()
    assert len(results) == 5, completed.stderr
    for result in results:
        assert result.startswith("Error: "), result
        assert "no file descriptors are left" in result


_NO_FDS_TOOLS = """
import asyncio, os, resource, sys
from ctxoffload import LocalWorkspace
from ctxoffload.agent import workspace_tools
from ctxoffload.readback import retrieval_tool

async def main():
    ws = LocalWorkspace(sys.argv[1])
    Read, Grep, Glob = workspace_tools(ws)
    retrieve = retrieval_tool(ws)
    calls = {
        "Grep dir": lambda: Grep("x", "."),
        "Grep glob": lambda: Grep("x", "**/*.txt"),
        "Grep file": lambda: Grep("x", "notes.txt"),
        "Glob": lambda: Glob("**/*.txt"),
        "Read": lambda: Read("notes.txt"),
        "retrieve": lambda: retrieve("notes.txt"),
        "retrieve pattern": lambda: retrieve("notes.txt", pattern="x"),
    }
    for call in calls.values():  # every module loaded, every thread started, before
        await call()
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    held = []
    while True:  # take every descriptor that is left
        try:
            held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            break
    for name, call in calls.items():
        try:
            answer = str(await call())
        except BaseException as exc:
            answer = f"raised {type(exc).__name__}: {exc}"
        print(name, "->", answer.splitlines()[0])

asyncio.run(main())
"""


def test_with_no_file_descriptors_left_every_tool_entry_answers_the_cause_and_fix(
    root: Path,
) -> None:
    # The async tools an agent calls (Read, Grep, Glob, retrieve_offloaded_content), in a
    # process whose descriptors are all taken.
    completed = subprocess.run(
        [sys.executable, "-c", _NO_FDS_TOOLS, str(root)], capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr
    results = completed.stdout.splitlines()
    assert len(results) == 7, completed.stderr
    for result in results:
        _name, _, answer = result.partition(" -> ")
        assert answer.startswith("Error: "), result
        assert "Too many open files" in answer, result
        assert "try again when fewer files are open" in answer, result


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads directories whatever their mode")
def test_an_unreadable_directory_is_an_error(root: Path) -> None:
    (root / "sub").chmod(0)
    try:
        assert FileToolbox([root]).grep("x", "sub").startswith("Error: cannot list")
        assert FileToolbox([root]).glob("sub/*").startswith("Error: cannot list")
    finally:
        (root / "sub").chmod(0o755)
