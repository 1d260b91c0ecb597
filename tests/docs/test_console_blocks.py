"""Every ```` ```console ```` block of README.md and docs/, run against a real demo workspace.

How a block runs (the conventions are tests/docs/blocks.py's; this is the runner):

- Once per test process, `ctxoffload demo --workdir FOLDER` (the installed `ctxoffload`
  script, in a child process) writes the demo's workspace. Each block starts from a copy of
  exactly that workspace, in that same folder, so a block may change it (plant a link,
  append a torn line, replay a transcript) without touching the next block.
- A block's `$ ` lines run one after the other in ONE bash process, as a person would type
  them: FOLDER is the current directory at the start, and a `cd` or an `export` holds for
  the rest of the block. `ctxoffload` and `python` are the ones of the environment running
  the tests. Standard output and standard error are read together, in the order written
  (`PYTHONUNBUFFERED=1`), with `COLUMNS=80` and without `$CTXOFFLOAD_WORKDIR`.
- `/tmp/demo` in a command means FOLDER, and in what a command printed FOLDER is written
  back as `/tmp/demo`; then it is compared with the expected lines (`...` is any lines, or
  any text inside a line). A command whose expected output starts with the command's error
  prefix (`ctxoffload cat: ...`) may exit with any status; every other command must exit 0
  (show another status with `; echo "exit $?"`).
- A command that runs the demo into `/tmp/demo` (`ctxoffload demo --workdir /tmp/demo`)
  gets a fresh folder of FOLDER's kind instead, and from then on `/tmp/demo` in that block
  means the fresh folder. It is removed after the block.
- `<!-- test: skip -- REASON -->` skips a block; the other annotations are for Python.

Token figures depend on the workspace's path: every preview, truncation notice and summary
names its files, and the token counts of those texts decide when compression triggers and
what it keeps. So the expected outputs are real output of a run in `/tmp/demo` itself, and
FOLDER is a folder that gives the same figures: `/tmp/` and a four-letter word that counts
as exactly as many o200k tokens as `demo` wherever a path stands (the same number of
characters, so byte counts agree too). `test_each_stand_in_folder_counts_as_tmp_demo`
checks that for every word the runner may pick; the folder is made with `mkdir`, so a word
already taken under /tmp (by a person, or by another test process) is passed over and
nothing that exists is ever touched. What does vary from run to run is written `...` in the
pages: clock times, message ids (random), durations, and the size of events.jsonl (which
holds the durations).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from blocks import ROOT, Block, blocks, matches, pages

from ctxoffload import get_token_counter

DEMO = "/tmp/demo"
"""The demo workspace, as the pages write it."""

STAND_INS = (
    "cart", "grid", "icon", "maps", "song", "tree", "unit", "form", "game",
    "item", "mail", "node", "page", "shop", "site", "star", "team", "view",
)  # fmt: skip
"""Words `w` for which `/tmp/w` gives a demo run with the figures of `/tmp/demo` (each was
compared once by whole demo runs and the commands' outputs; the test checks the token
counts that make it so)."""

# Where a path stands in what the demo and the commands write: in prose, quoted, in JSON,
# in a reminder's `reference='...'`, after `=`, in parentheses, at the end of a line.
_PATH_SETTINGS = (
    "whole output in {}/sessions/nightly-job/tool_result-call_1.txt",
    "reference='{}/sessions/nightly-job/tool_result-call_2.txt', pattern='...'",
    '{{"reference": "{}/sessions/nightly-job/context.jsonl"}}',
    "<data url='{}/data/bb47.png' name='storage-panel.png'/>",
    "session nightly-job ({}/sessions/nightly-job)\n",
    "moved out of the context into {}/sessions/nightly-job/context.jsonl (lines 1-4)",
    " {} ",
)

_DEMO_COMMAND = re.compile(r"\bctxoffload\s+(?:--workdir(?:=|\s+)\S+\s+)?demo\b")
_DEMO_PATH = re.compile(re.escape(DEMO) + r"(?![\w.-])")
_ERROR_PREFIX = re.compile(r"ctxoffload [a-z]+: ")
_TIMEOUT = 300  # seconds for a whole block; a slow moment on a busy machine is not a failure


@dataclass
class Command:
    """One `$ ` line of a console block and the output it should print."""

    line: int  # in the page
    text: str
    expected: str

    @property
    def may_fail(self) -> bool:
        """Whether the expected output starts with the command's error prefix (`ctxoffload
        cat: ...`), so that any exit status will do."""
        first = next((line for line in self.expected.splitlines() if line.strip()), "")
        return _ERROR_PREFIX.match(first) is not None


@dataclass
class Outcome:
    """What a command printed (FOLDER written as /tmp/demo) and its exit status."""

    command: Command
    output: str
    status: int | None  # None: the shell ended before the command finished

    def problem(self) -> str | None:
        """Why this does not match the page, or None."""
        if self.status is None:
            return "the shell ended before this command finished"
        if not matches(self.command.expected, self.output):
            return "the output differs"
        if not self.command.may_fail and self.status != 0:
            return f"exit status {self.status}, expected 0"
        return None


def commands(block: Block) -> list[Command]:
    """The commands of a console block, each with the lines up to the next `$ `.

    Raises:
        ValueError: text before the first `$ `, or no command at all.
    """
    found: list[Command] = []
    for number, line in enumerate(block.code.splitlines(), block.line + 1):
        if line.startswith("$ "):
            found.append(Command(number, line[2:], ""))
        elif found:
            found[-1].expected += line + "\n"
        elif line.strip():
            raise ValueError(f"{block.where}: a console block starts with a `$ ` command")
    if not found:
        raise ValueError(f"{block.where}: a console block without a `$ ` command")
    return found


def console_blocks() -> list[Block]:
    """Every console block of README.md and docs/."""
    return [block for page in pages() for block in blocks(page) if block.language == "console"]


def counts_as_demo(word: str) -> bool:
    """Whether `/tmp/WORD` costs as many tokens as `/tmp/demo` wherever a path stands."""
    counter = get_token_counter("gpt-4o-mini", exact=True)
    return len(word) == len("demo") and all(
        counter.count_text(text.format(f"/tmp/{word}")) == counter.count_text(text.format(DEMO))
        for text in _PATH_SETTINGS
    )


def reserve_folder() -> Path:
    """A new, empty folder that gives the demo the figures of `/tmp/demo`.

    Raises:
        pytest.fail: every stand-in under /tmp is taken.
    """
    for word in STAND_INS:
        folder = Path("/tmp") / word
        with contextlib.suppress(FileExistsError):
            folder.mkdir()
            return folder
    names = ", ".join(f"/tmp/{w}" for w in STAND_INS)
    pytest.fail(f"every stand-in folder for {DEMO} is taken ({names}): remove stale ones")


def environment() -> dict[str, str]:
    """What the commands run with: this environment's `ctxoffload` and `python` first."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CTXOFFLOAD_WORKDIR", "BASH_ENV", "ENV", "PYTHONWARNINGS")
    }
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8", COLUMNS="80")
    return env


def clear(folder: Path) -> None:
    """Remove everything inside `folder` (links themselves, never what they point to)."""
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


@dataclass
class DemoWorkspace:
    """The demo's workspace, put back as the demo left it before each block."""

    folder: Path
    pristine: Path
    extra: list[Path] = field(default_factory=list)  # folders made for `ctxoffload demo` lines

    def reset(self) -> None:
        """FOLDER as the demo left it; the other folders made since removed."""
        clear(self.folder)
        shutil.copytree(self.pristine, self.folder, symlinks=True, dirs_exist_ok=True)
        for folder in self.extra:
            shutil.rmtree(folder, ignore_errors=True)
        self.extra.clear()

    def run(self, block: Block) -> list[Outcome]:
        """Run a block's commands in one shell, from a fresh copy of the workspace."""
        self.reset()
        listed = commands(block)
        marker = f"ctxoffload-docs-{uuid.uuid4().hex}"
        current = self.folder
        script = []
        for index, command in enumerate(listed):
            text = command.text
            if _DEMO_COMMAND.search(text) and _DEMO_PATH.search(text):
                current = reserve_folder()
                self.extra.append(current)
            script.append(_DEMO_PATH.sub(str(current), text))
            script.append(f'printf "\\n{marker} {index} %d\\n" "$?"')
        done = subprocess.run(
            ["bash", "-c", "\n".join(script) + "\n"],
            cwd=self.folder,
            env=environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=_TIMEOUT,
            check=False,
        )
        text = done.stdout.decode("utf-8", errors="replace")
        for folder in sorted([self.folder, *self.extra], key=lambda p: -len(str(p))):
            text = text.replace(str(folder), DEMO)
        pieces = re.split(rf"\n{marker} (\d+) (-?\d+)\n", text)
        outcomes = []
        for index, command in enumerate(listed):
            if 3 * index + 2 < len(pieces):
                output, status = pieces[3 * index], int(pieces[3 * index + 2])
            else:
                output = pieces[3 * index] if 3 * index < len(pieces) else ""
                status = None
            outcomes.append(Outcome(command, output, status))
        return outcomes

    def remove(self) -> None:
        """Remove every folder this made."""
        self.reset()
        shutil.rmtree(self.folder, ignore_errors=True)


def report(block: Block, outcomes: list[Outcome]) -> str | None:
    """A readable account of the commands that do not match the page, or None."""
    failures = []
    for outcome in outcomes:
        problem = outcome.problem()
        if problem is None:
            continue
        page = block.where.rsplit(":", 1)[0]
        failures.append(
            f"{page}:{outcome.command.line}: $ {outcome.command.text}\n  {problem}\n"
            f"--- expected\n{outcome.command.expected.rstrip()}\n"
            f"--- printed (exit {outcome.status})\n{outcome.output.rstrip()}\n"
        )
    return "\n".join(failures) or None


@pytest.fixture(scope="session")
def demo_workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoWorkspace]:
    """The demo's workspace in a folder that stands for /tmp/demo (see the module's doc)."""
    folder = reserve_folder()
    pristine = tmp_path_factory.mktemp("demo-pristine")
    try:
        demo = subprocess.run(
            [str(Path(sys.executable).parent / "ctxoffload"), "demo", "--workdir", str(folder)],
            env=environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT,
            check=False,
        )
        if demo.returncode != 0:
            pytest.fail(f"ctxoffload demo exited {demo.returncode}:\n{demo.stderr}")
        shutil.copytree(folder, pristine, symlinks=True, dirs_exist_ok=True)
        workspace = DemoWorkspace(folder, pristine)
        yield workspace
        workspace.remove()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("block", console_blocks(), ids=lambda b: b.where)
def test_console_block(block: Block, demo_workspace: DemoWorkspace) -> None:
    if "skip" in block.annotations:
        pytest.skip(block.annotations["skip"])
    unknown = set(block.annotations) - {"skip"}
    assert not unknown, f"{block.where}: {sorted(unknown)} mean nothing for a console block"
    failures = report(block, demo_workspace.run(block))
    if failures:
        pytest.fail(failures, pytrace=False)


# -- the runner itself ---------------------------------------------------------------------


def console(tmp_path: Path, code: str) -> Block:
    """A console block on a page of its own."""
    page = tmp_path / "page.md"
    page.write_text(f"```console\n{code}```\n", encoding="utf-8")
    return blocks(page)[0]


def test_each_stand_in_folder_counts_as_tmp_demo() -> None:
    assert [w for w in STAND_INS if not counts_as_demo(w)] == []
    assert not counts_as_demo("ab12"), "the check tells a folder that counts differently"


def test_a_block_that_matches_passes(tmp_path: Path, demo_workspace: DemoWorkspace) -> None:
    block = console(
        tmp_path,
        "$ pwd\n/tmp/demo\n$ ctxoffload ls\nsession ...\nnightly-job ... 4\n"
        "$ cd sessions && ls /tmp/demo/sessions\nnightly-job\n$ pwd\n/tmp/demo/sessions\n",
    )
    assert report(block, demo_workspace.run(block)) is None


def test_a_wrong_line_of_output_fails(tmp_path: Path, demo_workspace: DemoWorkspace) -> None:
    block = console(tmp_path, "$ ctxoffload ls\nsession ...\nnightly-job ... 5\n")
    failures = report(block, demo_workspace.run(block))
    assert failures is not None and "the output differs" in failures
    assert "page.md:2: $ ctxoffload ls" in failures


def test_a_failing_command_fails_unless_its_error_line_is_expected(
    tmp_path: Path, demo_workspace: DemoWorkspace
) -> None:
    refused = "ctxoffload cat: reference '/etc/passwd' names no file inside the workspace ..."
    expected = console(tmp_path, f"$ ctxoffload cat /etc/passwd\n{refused}\n")
    assert report(expected, demo_workspace.run(expected)) is None
    unexpected = console(tmp_path, "$ ctxoffload cat /etc/passwd\n...\n")
    assert "exit status 2, expected 0" in (report(unexpected, demo_workspace.run(unexpected)) or "")
    shown = console(tmp_path, '$ ctxoffload cat /etc/passwd; echo "exit $?"\n...\nexit 2\n')
    assert report(shown, demo_workspace.run(shown)) is None


def test_each_block_starts_from_the_demo_workspace(
    tmp_path: Path, demo_workspace: DemoWorkspace
) -> None:
    planted = console(tmp_path, "$ ln -s /etc/passwd sessions/nightly-job/tool_result-x.txt\n")
    assert report(planted, demo_workspace.run(planted)) is None
    verified = console(tmp_path, "$ ctxoffload verify\nok: 15 files, ...\n")
    assert report(verified, demo_workspace.run(verified)) is None


@pytest.mark.slow
def test_a_demo_line_runs_into_a_fresh_folder(
    tmp_path: Path, demo_workspace: DemoWorkspace
) -> None:
    block = console(
        tmp_path,
        "$ ctxoffload demo --workdir /tmp/demo --session again\n"
        "ctxoffload demo: session 'again' in /tmp/demo\n...\n"
        "$ ls /tmp/demo/sessions\nagain\n$ ls sessions\nnightly-job\n",
    )
    outcomes = demo_workspace.run(block)
    assert report(block, outcomes) is None
    fresh = demo_workspace.extra[0]
    assert fresh.parent == Path("/tmp") and fresh.name in STAND_INS
    demo_workspace.reset()
    assert not fresh.exists()


def test_the_pages_console_blocks_are_found() -> None:
    found = console_blocks()
    assert all(block.page.is_relative_to(ROOT) for block in found)
    assert any(block.page.name == "cli.md" for block in found)
