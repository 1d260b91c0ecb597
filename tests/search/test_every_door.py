"""Every door to the one search engine finds the same lines: the agent's Grep, the retrieval
tool's pattern search, `ctxoffload grep` and the viewer's search, given the same pattern, file
and flags (each door adapted: the agent's tools take a fixed string as `escape(string)` and
ignore case by `(?i)`), give the same line numbers and the same text; a door that cuts a long
line around its match gives a part of that line."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from ctxoffload import LocalWorkspace
from ctxoffload.cli.ui._model import UiModel
from ctxoffload.exceptions import CliError, InvalidContent
from ctxoffload.readback import FileToolbox, escape, retrieve_offloaded_content

LONG = "x" * 100_000 + " ERROR 7 at the end of a long line"


class Case(NamedTuple):
    content: bytes
    pattern: str
    fixed: bool = False
    ignore_case: bool = False
    context: int = 0


CASES = {
    "regex": Case(b"ok 1\nERROR 42 disk\nERRXX 3\nfine\nERROR 7 net\n", r"ERR(OR|XX) \d+"),
    "fixed string with metacharacters": Case(
        b"a.b(c) [x]{2}\naxb(c) [x]{2}\nq\na.b(c) [x]{2} again\n", "a.b(c) [x]{2}", fixed=True
    ),
    "ignore case": Case(b"Error one\nERROR two\nerror three\nnothing\n", "error", ignore_case=True),
    "not UTF-8": Case(b"caf\xe9 ERROR 1\nplain\n\xff\xfe ERROR 2 \x80\n", "ERROR [0-9]"),
    "very long line": Case(f"head\n{LONG}\ntail ERROR 8\n".encode(), r"ERROR \d"),
    "context lines": Case(
        b"1\n2\nERROR a\n4\n5\n6\n7\nERROR b\nERROR c\n10\n11\n12\n", "ERROR", context=1
    ),
    "carriage returns": Case(b"done\r\nnot done yet\r\ndone\n", "done$"),
}


class Found(NamedTuple):
    number: int
    text: str
    is_match: bool


def _expected(case: Case) -> list[Found]:
    """What a plain line-by-line search of the decoded file finds (Python's re)."""
    flags = re.IGNORECASE if case.ignore_case else 0
    regex = re.compile(re.escape(case.pattern) if case.fixed else case.pattern, flags)
    lines = [
        line.removesuffix("\r") for line in case.content.decode("utf-8", "replace").split("\n")[:-1]
    ]
    matching = [i for i, line in enumerate(lines) if regex.search(line)]
    shown = sorted(
        {j for i in matching for j in range(i - case.context, i + case.context + 1)}
        & set(range(len(lines)))
    )
    return [Found(j + 1, lines[j], j in matching) for j in shown]


def _agent_pattern(case: Case) -> str:
    pattern = escape(case.pattern) if case.fixed else case.pattern
    return "(?i)" + pattern if case.ignore_case else pattern


def _grep_tool(case: Case, workdir: Path, file: Path) -> list[Found]:
    answer = FileToolbox([workdir]).grep(
        _agent_pattern(case), str(file), context_lines=case.context, max_matches=100
    )
    found = []
    for line in answer.splitlines():
        mark = re.match(r"(?:.*/)?tool_result-matrix\.txt([:-])(\d+)\1", line)
        if mark is not None:
            text = line[mark.end() :]
            found.append(Found(int(mark.group(2)), text, mark.group(1) == ":"))
    return found


def _retrieval_tool(case: Case, workdir: Path, file: Path) -> list[Found]:
    answer = asyncio.run(
        retrieve_offloaded_content(
            LocalWorkspace(workdir),
            str(file),
            pattern=_agent_pattern(case),
            context_lines=case.context,
            max_chars=200_000,
        )
    )
    found = []
    for line in answer.splitlines()[1:]:
        mark = re.match(r"([> ]) *(\d+)\t", line)
        if mark is not None:
            found.append(Found(int(mark.group(2)), line[mark.end() :], mark.group(1) == ">"))
    return found


def _flags(case: Case) -> list[str]:
    return ["-F"] * case.fixed + ["-i"] * case.ignore_case


def _ctxoffload_grep(case: Case, workdir: Path, file: Path) -> list[Found]:
    """Its --json matches; with context lines, its printed lines (where a byte 0x80-0x9f that
    is not UTF-8 would be shown inert, as `\\x80`: terminal safety, not the search)."""
    shows = ["-C", str(case.context), "--max-columns", "0"] if case.context else ["--json"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxoffload",
            "--workdir",
            str(workdir),
            "grep",
            *_flags(case),
            *shows,
            "--",
            case.pattern,
            "s",
        ],
        capture_output=True,
        check=True,
        env={"CTXOFFLOAD_GREP": "python", "PATH": "/usr/bin:/bin"},
    )
    if not case.context:
        return [Found(hit["line"], hit["text"], True) for hit in json.loads(done.stdout)]
    found = []
    prefix = str(file).encode()
    for line in done.stdout.split(b"\n"):
        if line.startswith(prefix):
            sep, rest = line[len(prefix) : len(prefix) + 1], line[len(prefix) + 1 :]
            number, _, text = rest.partition(sep)
            found.append(Found(int(number), text.decode("utf-8", "replace"), sep == b":"))
    return found


def _viewer_search(case: Case, workdir: Path, file: Path) -> list[Found]:
    answer = UiModel(str(workdir)).search(
        case.pattern, "s", fixed=case.fixed, ignore_case=case.ignore_case
    )
    return [Found(row["line"], row["text"], True) for row in answer["matches"]]


DOORS = {
    "Grep": (_grep_tool, True),
    "retrieval": (_retrieval_tool, True),
    "ctxoffload grep": (_ctxoffload_grep, True),
    "viewer": (_viewer_search, False),  # no context lines: the matches alone
}


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("case", CASES)
def test_every_door_finds_the_same_lines(tmp_path: Path, case: str, door: str) -> None:
    searched = CASES[case]
    file = tmp_path / "sessions" / "s" / "tool_result-matrix.txt"
    file.parent.mkdir(parents=True)
    file.write_bytes(searched.content)
    search, shows_context = DOORS[door]
    expected = _expected(searched)
    if not shows_context:
        expected = [line for line in expected if line.is_match]
    found = search(searched, tmp_path, file)
    assert [(f.number, f.is_match) for f in found] == [(e.number, e.is_match) for e in expected]
    for got, want in zip(found, expected, strict=True):
        assert got.text == want.text or _a_cut_of(got.text, want.text), (got, want)


def _a_cut_of(shown: str, line: str) -> bool:
    """Whether `shown` is `line` cut around its match, as the agent's tools cut a long line:
    `…part… [line has N characters; showing a–b]`."""
    cut = re.fullmatch(r"…?(.*?)…? \[line has ([\d,]+) characters; showing [\d,]+–[\d,]+\]", shown)
    return (
        cut is not None and int(cut.group(2).replace(",", "")) == len(line) and cut.group(1) in line
    )


def _refusal(door: str, workdir: Path, file: Path, pattern: str) -> str:
    """What `door` says of `pattern`, where it refuses it; '' where it searched."""
    if door == "Grep":
        answer = FileToolbox([workdir]).grep(pattern, str(file))
        return answer if answer.startswith("Error:") else ""
    if door == "retrieval":
        try:
            asyncio.run(
                retrieve_offloaded_content(LocalWorkspace(workdir), str(file), pattern=pattern)
            )
        except InvalidContent as refused:
            return str(refused)
        return ""
    if door == "ctxoffload grep":
        done = subprocess.run(
            [sys.executable, "-m", "ctxoffload", "--workdir", str(workdir), "grep", "--", pattern],
            capture_output=True,
            text=True,
            env={"CTXOFFLOAD_GREP": "python", "PATH": "/usr/bin:/bin"},
        )
        return done.stderr if done.returncode == 2 else ""
    try:
        UiModel(str(workdir)).search(pattern, "s")
    except CliError as refused:
        return str(refused)
    return ""


@pytest.mark.parametrize("door", DOORS)
def test_every_door_refuses_an_empty_pattern_alike(tmp_path: Path, door: str) -> None:
    # It would match every line: a file's whole text, which reading it gives, capped.
    file = tmp_path / "sessions" / "s" / "tool_result-matrix.txt"
    file.parent.mkdir(parents=True)
    file.write_bytes(b"one\ntwo\n")
    said = _refusal(door, tmp_path, file, "")
    assert "the pattern is empty" in said, said
