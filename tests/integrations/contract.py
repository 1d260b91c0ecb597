"""The door contract's test drivers (docs/guides/hosts.md, DESIGN.md section 17).

`test_contract.py` holds every door to the same promises through a `DoorDriver` per door,
each in `contract_<door>.py`: a driver builds its door on a workspace and plays a
conversation through the door's REAL host (its own fake or scripted model, offline), the
way a user of that host would. A driver that cannot drive a promise says why in
`reasons` (an explicit, reasoned skip), never by leaving it out.

A new door proves itself here: write its driver, add it to `DRIVERS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import os
import re
import threading
from collections.abc import Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
from frameworks import framework_required, required_frameworks
from workspace_kinds import local, memory, memory_bucket, sqlite

from ctxoffload._disk.ids import session_id_for
from ctxoffload._doors.doors import DOORS
from ctxoffload.text import TRUNCATION_MARKER
from helpers import install_hint

BIG = "".join(f"12:{i % 60:02d} INFO export batch {i} done\n" for i in range(60_000))
"""A tool output of ~1.9 MB: over every door's limit, stored whole."""

MEDIUM = BIG[:20_000]
"""An output over every door's limit (300 tokens here, 3,000 for the Claude Code hooks), small
enough to run many times."""

NEEDLE = "export batch 41234 done"
"""A line of `BIG` the read-back tools find."""


def dense(limit: int) -> str:
    """A tool output of fewer characters than `limit` that holds nearly three times as many
    tokens (o200k, with which every door here counts): lines of `ꙮ`, three tokens each."""
    return ("ꙮ" * 9 + "\n") * ((limit - 1) // 10)


@dataclass
class Turn:
    """One turn of a conversation: the user's message, the output of the one tool call the
    model makes before it answers (None: it answers at once), and that call's arguments (the
    tool `fetch` takes one, `note`, a text; none given: the call has none)."""

    user: str
    tool_output: str | None = None
    note: str | None = None

    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments of the turn's call, as the model writes them."""
        return {} if self.note is None else {"note": self.note}


def call_id(turn: Turn) -> str:
    """The id of the tool call a turn makes: the same turn has the same id in every process
    (a resumed conversation must not reuse an earlier call's id, as no host does)."""
    return "call_" + hashlib.sha256(turn.user.encode()).hexdigest()[:12]


def answer(turn: Turn) -> str:
    """The model's answer to a turn: the same turn has the same answer in every process (the
    calls of a conversation resumed in a new process are compared with an unbroken one's)."""
    return "answer to " + " ".join(turn.user.split()[:2])


def scripted(
    turns: list[Turn], call: Callable[[str, dict[str, Any], str], Any], say: Callable[[str], Any]
) -> tuple[list[Any], list[str]]:
    """A scripted model's replies for `turns`, in the host's types, and the outputs its tool
    returns in order: per turn, a call of the tool `fetch` (id `call_id(turn)`) where the turn
    calls one, then its `answer`. `call(name, arguments, id)` and `say(text)` build the
    host's replies."""
    replies: list[Any] = []
    outputs: list[str] = []
    for turn in turns:
        if turn.tool_output is not None:
            replies.append(call("fetch", turn.arguments, call_id(turn)))
            outputs.append(turn.tool_output)
        replies.append(say(answer(turn)))
    return replies, outputs


@dataclass
class Outcome:
    """What a conversation through a door did.

    Attributes:
        session: the ctxoffload session it wrote.
        sent: each model call the door saw, as the messages' text the model was sent (a door
            that sees no model call leaves it empty).
        kept: what the host keeps of the last tool output (its state, its context).
        names: how `kept` names the file that holds the output ("": by the file's name; a
            host whose own tools read it back names it its own way, deepagents by its path).
        tools: the names of the tools the host's agent was given (its own and the door's).
    """

    session: str
    sent: list[list[str]] = field(default_factory=list)
    kept: str = ""
    names: str = ""
    tools: list[str] = field(default_factory=list)


class DoorDriver:
    """Drives one door through its real host. Subclasses set the attributes and the methods.

    Attributes:
        door: the door's name (`ctxoffload._doors.doors.DOORS`).
        module: the host package a driver imports (None: nothing beyond ctxoffload).
        needs: a name the host module has in the release the door needs ("" none).
        extra: the `.ci/run` environment that requires it (`pydantic_ai`; its pip extra is
            spelt with '-').
        reasons: promise name -> why this door does not keep it (an explicit skip).
        gaps: promise name -> what this door does not do yet that it should: the promise is
            still checked and must fail (an expected failure); once it holds, the test fails
            until the gap is taken out.
        limit: the `tool_result_limit` the driver builds its door with.
        host_readers: what the host itself gives its model to read a stored file back on a
            workspace on a folder (Claude Code's own Read and Grep: `FILE_TOOLS`, the words
            that name them), beside the tools a conversation's `Outcome` lists.
    """

    door: str = ""
    limit: int = 300
    host_readers: frozenset[str] = frozenset()
    module: str | None = None
    door_object: str = ""
    """The attribute of what `make` returns that is the door's object, whose `last_session`
    names the session of the run begun last through it ("": the door has none)."""
    needs: str = ""
    extra: str = ""
    reasons: ClassVar[dict[str, str]] = {}
    gaps: ClassVar[dict[str, str]] = {}

    def make(self, workspace: Any) -> Any:
        """The door on `workspace`, built as the host's guide builds it."""
        raise NotImplementedError

    def make_summarizing(self, workspace: Any, summary_model: object) -> Any:
        """The door's summary writer (`Door.summaries`, a class of the door's module) built
        on `workspace` with `summary_model`, as the host's guide builds it."""
        module = importlib.import_module(f"ctxoffload.integrations.{self.door.replace('-', '_')}")
        writer = getattr(module, DOORS[self.door].summaries)
        return writer(workspace, summary_model=summary_model)

    def converse(self, made: Any, conversation: str | None, turns: list[Turn]) -> Outcome:
        """Play `turns` as one conversation (`conversation`: the host's own id for it; None:
        the host is given none)."""
        raise NotImplementedError

    @contextlib.contextmanager
    def live_run(self, workspace: Any, conversation: str) -> Iterator[None]:
        """A run of `conversation` that is live (waiting inside a tool) until the block ends,
        then lets it finish and checks that it did."""
        raise NotImplementedError
        yield

    def grep(self, made: Any, conversation: str, pattern: str) -> str:
        """The answer of the door's Grep tool, called as the host calls its tools."""
        raise NotImplementedError

    def host_id(self, conversation: str) -> str:
        """The host's own id of the conversation this driver calls `conversation`: what the
        door maps to its session (ADK's is `app/user/session id`, its session ids being unique
        only within an app and a user)."""
        return conversation

    def session_of(self, conversation: str) -> str:
        """The session the door writes `conversation` to, by the one rule."""
        return session_id_for(self.host_id(conversation))

    def as_the_host_gives(self, output: str) -> str:
        """A tool's output as the host hands it to its door (smolagents strips it before any
        callback sees it): what the door stores whole."""
        return output

    def reopen(self, made: Any, workspace: Any) -> Any:
        """The door built anew on `workspace` (a new object on the same folder), keeping what
        the HOST saved of its conversations (its checkpointer, its message history): what a
        new process of the same application starts from."""
        return self.make(workspace)


def gated_fetch(made: Any, outputs: list[str]) -> Callable[[], Awaitable[str]]:
    """The async tool `fetch` of a driver's conversation: `outputs` in order, waiting at
    `made.gate` (after setting `made.entered`) while `run_held_in_its_tool` holds it."""
    gate, entered = made.gate, made.entered

    async def fetch(note: str = "") -> str:
        """Fetch the next output (`note`: what the caller says of it)."""
        if gate is not None:
            entered.set()
            await asyncio.to_thread(gate.wait, 30)
        return outputs.pop(0)

    return fetch


@contextlib.contextmanager
def run_held_in_its_tool(driver: DoorDriver, made: Any, conversation: str) -> Iterator[None]:
    """`driver.live_run` for a door whose conversation's tool waits at `made.gate` (set here)
    after setting `made.entered`: a run of `conversation` through `made`, on a thread, live
    inside its tool until the block ends; then let finish and checked that it did."""
    made.gate = threading.Event()
    done: list[Outcome] = []
    runner = threading.Thread(
        target=lambda: done.append(
            driver.converse(made, conversation, [Turn("wait", tool_output="slow")])
        )
    )
    runner.start()
    try:
        assert made.entered.wait(60), "the run never reached its tool"
        yield
    finally:
        made.gate.set()
        runner.join(60)
    assert done and done[0].session == driver.session_of(conversation)


def skip_where_it_runs_elsewhere(driver: DoorDriver) -> None:
    """Skip a door in a host's environment that is not its own: each door's contract runs once,
    in its host's environment, or in the main run for the doors that need no host package
    (the Agent, Claude Code's hook). The MCP SDK, which other hosts pull in, does not make
    every host's run check the proxy again."""
    required = required_frameworks()
    if not required or driver.extra in required:
        return
    where = f"the {driver.extra} environment" if driver.extra else "the main run"
    pytest.skip(f"{driver.door}'s contract is checked in {where}, once")


def skip_unless(driver: DoorDriver, promise: str) -> None:
    """Skip a promise the driver's door says it cannot keep, with its reason; skip a door
    whose host is not installed here (fail where `.ci/run` requires it)."""
    reason = driver.reasons.get(promise)
    if reason is not None:
        pytest.skip(f"{driver.door} does not keep '{promise}': {reason}")
    if driver.module is None:
        return
    install = install_hint(driver.extra)
    try:
        module = importlib.import_module(driver.module)
    except ImportError as exc:
        if framework_required(driver.extra):
            pytest.fail(f"{driver.module} is required in this run but does not import: {exc}")
        pytest.skip(
            f"{driver.module} is not installed: {install} "
            "(.ci/run runs the contract in each host's environment)"
        )
    if driver.needs and not hasattr(module, driver.needs):
        # Another host's environment may hold an older release, pulled in as its dependency.
        if framework_required(driver.extra):
            pytest.fail(f"{driver.module} here has no {driver.needs}: {install}")
        pytest.skip(f"{driver.module} here is a release without {driver.needs}: {install}")


@contextlib.contextmanager
def known_gap(driver: DoorDriver, promise: str) -> Iterator[None]:
    """Check `promise` in the block; a gap the driver names must make it fail (an expected
    failure, with what is missing), and a gap closed fails until it is taken out."""
    gap = driver.gaps.get(promise)
    try:
        yield
    except Exception:
        if gap is None:
            raise
        pytest.xfail(f"{driver.door} does not keep '{promise}' yet: {gap}")
    if gap is not None:
        pytest.fail(f"{driver.door} now keeps '{promise}': take it out of the driver's gaps")


def files_holding(root: Path, text: str) -> list[Path]:
    """Every regular file below `root` whose bytes contain `text` whole."""
    needle = text.encode()
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            if not path.is_symlink() and path.is_file() and needle in path.read_bytes():
                found.append(path)
    return found


def sessions_of(workspace: Any) -> set[str]:
    """The session folders of a `LocalWorkspace` now (none for a workspace with no folder)."""
    workdir = getattr(workspace, "workdir", None)
    folder = Path(workdir) / "sessions" if workdir is not None else None
    return {p.name for p in folder.iterdir()} if folder is not None and folder.is_dir() else set()


STORES: dict[str, Callable[[Path], Any]] = {
    "folder": local,
    "memory": memory,
    "bucket": memory_bucket,
    "sqlite": sqlite,
}
"""Every kind of store a door may be given, by name: a folder (`LocalWorkspace`), memory
(`InMemoryWorkspace`), a bucket (`ObjectStoreWorkspace`, `memory://`) and a database
(`SqlWorkspace`, SQLite)."""


FILE_TOOLS = "your file tools"
"""The words a notice names readers with when none is known: a host's own file tools."""

READER_TOOLS = ("Read", "Grep", "Glob", "retrieve_offloaded_content")
"""ctxoffload's read-back tools, as a door gives them."""


def readers_named(text: str, names: Collection[str] = ()) -> set[str]:
    """The read-back tools ctxoffload's words in `text` tell the model to use, among
    `READER_TOOLS` and `names`: a call written out (`Read(path=...)`), a short one (`Read
    offset=22`, `Grep it`, `retrieve_offloaded_content line_range=[...]`), `your Read tool`,
    `search it with Grep`; and `FILE_TOOLS` for the words that name none."""
    named = {FILE_TOOLS} if FILE_TOOLS in text else set()
    for name in {*READER_TOOLS, *names}:
        tool = re.escape(name)
        if re.search(
            rf"(?<![\w.]){tool}(?:\(| (?:offset|line_range)=| it\b| or pattern=| from line)"
            rf"|\byour {tool} tool\b|\bsearch it with {tool}\b",
            text,
        ):
            named.add(name)
    return named


_NOTICES = re.compile(
    rf"{re.escape(TRUNCATION_MARKER)}.*?</system-reminder>"  # a cut result or argument
    r"|<context_summary>.*?## "  # a summary's header, up to its first field
    r"|\[cleared: .*?\]"  # a cleared result's placeholder
    r"|earlier messages were moved out of the context.*?\]",  # a window's note
    re.DOTALL,
)


def reading_notices(text: str) -> list[str]:
    """The notices, placeholders and summary headers ctxoffload wrote in `text`: each tells
    the model where content went and how to read it back."""
    return _NOTICES.findall(text)


def drivers() -> list[DoorDriver]:
    """Every door's driver (imported lazily: a driver module imports its host)."""
    out: list[DoorDriver] = []
    for name in DRIVERS:
        module = importlib.import_module(f"contract_{name}")
        out.append(module.DRIVER)
    return out


DRIVERS: list[str] = [
    "agent",
    "agentscope",
    "claude_agent_sdk",
    "claude_code",
    "crewai",
    "deepagents",
    "google_adk",
    "haystack",
    "langchain",
    "llama_index",
    "mcp_proxy",
    "openai_agents",
    "pydantic_ai",
    "smolagents",
    "strands",
    "strands_storage",
]
"""The doors with a driver, by module (`contract_<name>.py`)."""


Check = Callable[[DoorDriver], None]
