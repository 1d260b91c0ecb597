"""`ctxoffload grep` starts light: no pathlib, whose import (urllib.parse, ipaddress) costs
~4.5 ms of a run that bench/bench_cli_grep.py measures against GNU grep; paths are spelled
as pathlib would spell them all the same."""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import LocalWorkspace, Msg, ToolCallBlock, ToolResultBlock
from ctxoffload.cli._arguments import child_path, path_text

# The modules pathlib brings in, none of which grep needs.
PATHLIB = ["pathlib", "urllib.parse", "ipaddress"]
# The message model, which grep does not need either: a context.jsonl line is decoded into
# the lines people read by `ctxoffload.text`, which reads the JSON as it is.
MESSAGE_MODEL = ["pydantic", "ctxoffload.messages"]

# Run in a fresh interpreter: which of the modules named in argv[2] are loaded before the
# first import of ctxoffload, each grep's (argv[1]) exit status, and which are loaded after.
# The runs come as lines of arguments separated by tabs, the modules separated by commas, and
# the report goes out as a repr: `json` would load `re`, which some tests watch.
CHILD = """
import io, sys
watched = sys.argv[2].split(",")
before = sorted(m for m in watched if m in sys.modules)
from ctxoffload.cli import main
runs = []
for line in sys.argv[1].split("\\n"):
    argv = line.split("\\t")
    sys.stdout = io.TextIOWrapper(io.BytesIO())
    runs.append([argv, main(argv)])
    sys.stdout = sys.__stdout__
loaded = sorted(m for m in watched if m in sys.modules)
print(repr({"before": before, "runs": runs, "loaded": loaded}))
"""


def loaded_by(runs: list[tuple[list[str], int]], watched: list[str]) -> list[str]:
    """Which of the `watched` modules the grep `runs` import, in a fresh interpreter (each
    run's exit status checked); skips when the interpreter loads one of them at start-up."""
    lines = "\n".join("\t".join(argv) for argv, _ in runs)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, lines, ",".join(watched)],
        capture_output=True,
        text=True,
        check=True,
    )
    report = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    if report["before"]:
        pytest.skip(f"the interpreter loads {report['before']} at start-up: nothing to measure")
    assert report["runs"] == [[argv, code] for argv, code in runs], done.stderr
    loaded: list[str] = report["loaded"]
    return loaded


def test_grep_does_not_import_pathlib(tmp_path: Path) -> None:
    workdir = tmp_path / "ws"
    for session in ("s1", "s2"):
        asyncio.run(
            LocalWorkspace(workdir, fsync=False).offload_tool_result(
                session, ToolResultBlock(id="call_1", name="logs", output="ok\nERROR disk full\n")
            )
        )
    (tmp_path / "a-file").write_text("x")
    ws = str(workdir)
    runs = [
        (["grep", "ERROR", "--workdir", ws], 0),
        (["grep", "ERROR", "s1", "--workdir", ws + "/./"], 0),
        (["grep", "-F", "-C", "1", "--events", "disk", "--workdir", ws], 0),
        (["grep", "--json", "-i", "error", "s2", "--workdir", ws], 0),
        (["grep", "nothing-matches", "--workdir", ws], 1),
        # Every way of failing, too: each is one line on stderr and exit 2.
        (["grep", "ERROR", "--workdir", str(tmp_path / "missing")], 2),
        (["grep", "ERROR", "--workdir", str(tmp_path / "a-file")], 2),
        (["grep", "ERROR", "--workdir", str(tmp_path)], 2),
        (["grep", "ERROR", "../s1", "--workdir", ws], 2),
        (["grep", "ERROR", "nope", "--workdir", ws], 2),
    ]
    loaded = loaded_by(runs, PATHLIB)
    assert loaded == [], f"`ctxoffload grep` imported {loaded}"


def context_log(tmp_path: Path) -> str:
    """A workspace whose session s1 has a context.jsonl of a request and a call: its path."""
    workdir = tmp_path / "ws"
    call = ToolCallBlock(id="c1", name="python", input={"code": 'print("FAILURE: disk")'})
    asyncio.run(
        LocalWorkspace(workdir, fsync=False).offload_context(
            "s1", msgs=[Msg(role="user", content="run it"), Msg(role="assistant", content=[call])]
        )
    )
    return str(workdir)


def test_grep_of_a_context_log_loads_neither_pathlib_nor_the_message_model(
    tmp_path: Path,
) -> None:
    ws = context_log(tmp_path)
    runs = [
        (["grep", 'print\\("FAILURE', "--workdir", ws], 0),
        (["grep", "-F", "-C", "2", 'print("FAILURE', "s1", "--workdir", ws], 0),
        (["grep", "--json", "-i", "RUN IT", "--workdir", ws], 0),
        (["grep", "-F", '"role":"user"', "s1", "--workdir", ws], 0),  # the raw JSON line
        (["grep", "nothing-matches", "--workdir", ws], 1),
    ]
    loaded = loaded_by(runs, PATHLIB + MESSAGE_MODEL)
    assert loaded == [], f"`ctxoffload grep` imported {loaded}"


def test_a_bad_workdir_is_named_as_pathlib_spells_it(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    missing = tmp_path / "missing" / "sub"
    result = cli("grep", "ERROR", "--workdir", f"{tmp_path}//missing/./sub/")
    assert result.code == 2
    assert result.err == (
        f"ctxoffload grep: workdir {str(missing)!r} does not exist: pass --workdir DIR\n"
    )


def test_grep_names_files_as_pathlib_spells_them(
    tmp_path: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(
        LocalWorkspace(tmp_path / "ws", fsync=False).offload_tool_result(
            "s1", ToolResultBlock(id="call_1", name="logs", output="ok\nERROR disk full\n")
        )
    )
    monkeypatch.chdir(tmp_path)
    for spelling in ["ws", "ws/", "./ws", "ws//", "ws/./"]:
        result = cli("grep", "ERROR", "--workdir", spelling)
        assert result.out == "ws/sessions/s1/tool_result-call_1.txt:2:ERROR disk full\n"
    monkeypatch.chdir(tmp_path / "ws")
    for spelling in ["", ".", "./"]:
        result = cli("grep", "ERROR", "s1", "--workdir", spelling)
        assert result.out == "sessions/s1/tool_result-call_1.txt:2:ERROR disk full\n"


SPELLINGS = [
    "",
    ".",
    "./",
    "..",
    "../x",
    "a",
    "a/",
    "a//b",
    "a/./b/.",
    "a/../b",
    "/",
    "//",
    "///",
    "//a//b/",
    "///a",
    "/./a",
    ".//a",
    "file://x",
    "a b/ c",
]


@pytest.mark.parametrize("text", SPELLINGS)
def test_path_text_spells_paths_as_pathlib_does(text: str) -> None:
    assert path_text(text) == str(Path(text))
    for name in ("sessions", "tool_result-call_1.txt", "a.."):
        assert child_path(path_text(text), name) == str(Path(text) / name)
        # The prefix a search makes once for a folder's many files names each the same.
        assert child_path(path_text(text), "") + name == str(Path(text) / name)


# What a search handed to ripgrep needs no more than GNU grep would: no `typing` (annotations
# only), no `shutil` (which brings bz2, lzma and zlib) to find ripgrep, no `subprocess` (which
# brings threading, selectors and signal's machinery) to start it.
RIPGREP_PATH = ["typing", "shutil", "bz2", "lzma", "subprocess", "threading", "selectors"]


def _logs_workspace(tmp_path: Path) -> str:
    """A workspace holding one offloaded log (session s1, two lines); its folder."""
    workdir = tmp_path / "ws"
    asyncio.run(
        LocalWorkspace(workdir, fsync=False).offload_tool_result(
            "s1", ToolResultBlock(id="call_1", name="logs", output="ok\nERROR disk full\n")
        )
    )
    return str(workdir)


def test_a_search_by_ripgrep_starts_light(tmp_path: Path) -> None:
    from ctxoffload.cli._grep_ripgrep import ripgrep_path

    if ripgrep_path() is None:
        pytest.fail("ripgrep is missing: pip install -e '.[test]' installs its binary wheel")
    ws = _logs_workspace(tmp_path)
    runs = [
        (["grep", "ERROR", "--workdir", ws], 0),
        (["grep", "-F", "-i", "disk", "s1", "--workdir", ws], 0),
        (["grep", "rows=3[0-9]{2} ", "--workdir", ws], 1),
    ]
    loaded = loaded_by(runs, PATHLIB + RIPGREP_PATH)
    assert loaded == [], f"`ctxoffload grep` imported {loaded}"


# What reading a plain grep command line needs no more than GNU grep does: argparse (with
# gettext and locale, which its messages load) costs a fifth of a search of 100 MB.
PARSER = ["argparse", "gettext", "locale"]


def test_a_plain_grep_line_is_read_without_argparse(tmp_path: Path) -> None:
    ws = _logs_workspace(tmp_path)
    runs = [
        (["grep", "ERROR", "--workdir", ws], 0),
        (["--workdir", ws, "grep", "-F", "-i", "disk", "s1"], 0),
        (["grep", "--json", "-C", "1", "--max-columns=9", "ERROR", "s1", f"--workdir={ws}"], 0),
        (["grep", "rows=3[0-9]{2} ", "--timeout", "5", "--workdir", ws], 1),
        # Failures that come after the reading: said by the command, as always.
        (["grep", "(", "--workdir", ws], 2),
        (["grep", "ERROR", "nope", "--workdir", ws], 2),
        (["grep", "ERROR", "--workdir", str(tmp_path / "missing")], 2),
    ]
    loaded = loaded_by(runs, PARSER)
    assert loaded == [], f"`ctxoffload grep` imported {loaded}"


# What a search RE2 and ripgrep answer needs no more than GNU grep would either: no `re`
# (with `enum`, ~6 ms: patterns are escaped and checked without it), no `signal` (which
# brings `enum` for two numbers `_signal` has), no `importlib` and `warnings` (a command's
# module is imported by `__import__`, PATH read without `os.get_exec_path`), no `math`.
RIPGREP_SEARCH = ["re", "enum", "signal", "importlib", "warnings", "math"]


def test_a_search_by_ripgrep_loads_neither_re_nor_signal(tmp_path: Path) -> None:
    from ctxoffload.cli._grep_ripgrep import ripgrep_path

    if ripgrep_path() is None:
        pytest.fail("ripgrep is missing: pip install -e '.[test]' installs its binary wheel")
    ws = _logs_workspace(tmp_path)
    runs = [
        (["grep", "ERROR", "--workdir", ws], 0),
        (["grep", "ERROR", "s1", "--workdir", ws], 0),
        (["grep", "-F", "disk full", "--workdir", ws], 0),
        (["grep", "-F", "-i", "DISK (full)", "s1", "--workdir", ws], 1),
        (["grep", "-i", "disk", "--workdir", ws], 0),
        (["grep", "rows=3[0-9]{2} ", "--workdir", ws], 1),
        # The engine's own search (context lines are not ripgrep's to print).
        (["grep", "-C", "1", "-F", "disk", "s1", "--workdir", ws], 0),
    ]
    loaded = loaded_by(runs, RIPGREP_SEARCH)
    assert loaded == [], f"`ctxoffload grep` imported {loaded}"


def test_a_context_log_is_searched_without_typing_or_html(tmp_path: Path) -> None:
    """`ctxoffload.text`, which decodes each context.jsonl line for grep, imports neither
    `typing` (annotations only) nor `html` (for a `<data/>` line, which grep never writes)."""
    ws = context_log(tmp_path)
    runs = [
        (["grep", 'print\\("FAILURE', "--workdir", ws], 0),
        (["grep", "-F", "-C", "2", 'print("FAILURE', "s1", "--workdir", ws], 0),
        (["grep", "-i", "RUN IT", "--workdir", ws], 0),
        (["grep", "nothing-matches", "--workdir", ws], 1),
    ]
    loaded = loaded_by(runs, ["typing", "html"])
    assert loaded == [], f"`ctxoffload grep` imported {loaded}"


# Put on the path of a `ctxoffload` process: an object freed when the interpreter's
# finalization clears the modules, which then writes FINALIZED (by what it holds: the
# module's names are cleared by then), and, with AT_EXIT set, an atexit function that writes
# AT_EXIT (a sitecustomize's, as coverage's or a user's own).
SITECUSTOMIZE = """
import atexit, os

class _Witness:
    def __del__(
        self,
        path=os.environ["FINALIZED"],
        flags=os.O_WRONLY | os.O_CREAT,
        open_file=os.open,
        write=os.write,
        close=os.close,
    ):
        fd = open_file(path, flags)
        write(fd, b"finalized")
        close(fd)

_witness = _Witness()
if os.environ.get("AT_EXIT"):
    def _at_exit():
        with open(os.environ["AT_EXIT"], "w") as f:
            f.write("ran")
    atexit.register(_at_exit)
"""


def test_grep_run_as_the_program_ends_once_its_output_is_out(tmp_path: Path) -> None:
    """`ctxoffload grep` run as the program (`python -m ctxoffload`, as the script runs
    `main()`) ends its process as soon as its output is out, without the interpreter's
    finalization (~5 ms); every line is out and the exit status is grep's (0, 1, 2). An
    atexit function registered in that process still runs: then the interpreter ends it as
    usual."""
    lines = 200_000
    output = "".join(f"INFO export row {i}\n" for i in range(lines))
    asyncio.run(
        LocalWorkspace(tmp_path / "ws", fsync=False).offload_tool_result(
            "s1", ToolResultBlock(id="call_1", name="logs", output=output + "ERROR disk full\n")
        )
    )
    ws = str(tmp_path / "ws")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    finalized = tmp_path / "finalized"
    paths = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "FINALIZED": str(finalized)}
    env.pop("AT_EXIT", None)

    def grep(*argv: str, **extra: str) -> subprocess.CompletedProcess[bytes]:
        command = [sys.executable, "-m", "ctxoffload", "grep", *argv, "--workdir", ws]
        return subprocess.run(command, capture_output=True, env={**env, **extra})

    shown = f"{ws}/sessions/s1/tool_result-call_1.txt"
    many = grep("-F", "INFO export")
    assert (many.returncode, many.stderr) == (0, b"")
    assert many.stdout.count(b"\n") == lines
    assert many.stdout.endswith(f"{shown}:{lines}:INFO export row {lines - 1}\n".encode())
    assert not finalized.exists()
    assert (grep("nothing-matches").returncode, finalized.exists()) == (1, False)
    refused = grep("ERROR", "nope")
    assert (refused.returncode, refused.stdout, finalized.exists()) == (2, b"", False)
    assert refused.stderr.startswith(b"ctxoffload grep: no session 'nope'")

    at_exit = tmp_path / "at_exit"
    kept = grep("ERROR", AT_EXIT=str(at_exit))
    assert (kept.returncode, kept.stdout) == (0, f"{shown}:{lines + 1}:ERROR disk full\n".encode())
    assert at_exit.read_text() == "ran"
    assert finalized.read_text() == "finalized"
