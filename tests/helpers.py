"""Helpers shared by test files (fixtures live in the conftest.py of each folder).

Import as `from helpers import ...`: pytest puts tests/ on the path for its conftest.py.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from ctxoffload import (
    Base64Source,
    Compressor,
    ContextConfig,
    ContextPipeline,
    DataBlock,
    LocalWorkspace,
    Msg,
    Summary,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
)
from ctxoffload.compression import PipelineRun

THOROUGH = (
    os.environ.get("CI", "").lower() == "true" or os.environ.get("CTXOFFLOAD_THOROUGH") == "1"
)
"""Whether property tests draw every example they are written for: where CI runs them
(`.ci/run` sets CI=true) or CTXOFFLOAD_THOROUGH=1 asks for it."""


def examples(count: int) -> int:
    """How many examples a property test with `@settings(max_examples=examples(count))` draws:
    `count` where the run is THOROUGH, a quarter of it (at least 10) in a contributor's run of
    the README's command, which stays within its few minutes; CI draws them all, so nothing is
    tested less before a change lands (CONTRIBUTING.md, docs/benchmarks.md)."""
    return count if THOROUGH else max(10, count // 4)


def summary_reply(mark: str) -> dict[str, str]:
    """A summary model's answer: every field of `Summary`, each `'<mark> <field>'`, so a test
    can tell which answer a summary came from."""
    return {name: f"{mark} {name}" for name in Summary.model_fields}


SUMMARY = summary_reply("scripted")
"""A summary model's answer, for a `ScriptedModel(default=SUMMARY)` that writes every summary."""


def install_hint(extra: str) -> str:
    """How a skipped test says to install what it needs: the command that works from a clone,
    with the extra as pip finds it (`pydantic_ai` or `openai_agents`, as a host's tests and
    `CTXOFFLOAD_REQUIRE_FRAMEWORKS` name it, is the extra `pydantic-ai`, `openai-agents`)."""
    return f"pip install -e '.[{re.sub(r'[-_.]+', '-', extra).lower()}]'"


# -- the transcript corpus ----------------------------------------------------------------------

CORPUS = Path(
    os.environ.get("CTXOFFLOAD_CORPUS")
    or Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
)
"""The real agent transcripts some tests replay: `../shared/corpus/` beside the repository
(CONTRIBUTING.md, "The corpus"), or the folder `CTXOFFLOAD_CORPUS` names. Used where it is,
never copied."""


def corpus_missing(name: str | None = None) -> str:
    """The one reason a test that needs the corpus (or its file `name`) skips with."""
    what = "the transcript corpus" if name is None else f"the corpus file {name}"
    return f"{what} is not at {CORPUS} (CONTRIBUTING.md, 'The corpus', says where it comes from)"


def corpus_files() -> list[Path]:
    """The corpus's transcripts, sorted (SOURCES.md left out); none when it is missing."""
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.iterdir() if p.is_file() and p.suffix != ".md")


def corpus_file(name: str) -> Path:
    """A file of the corpus; the calling test skips, saying so, when it is not there."""
    path = CORPUS / name
    if not path.is_file():
        import pytest

        pytest.skip(corpus_missing(None if not CORPUS.is_dir() else name))
    return path


def corpus_cases(paths: Sequence[Path], width: int = 40) -> list[Any]:
    """`paths` as the cases of a `parametrize`, each named by its file's stem (its first
    `width` characters); a file that is missing skips with `corpus_missing`, and no paths at
    all (the corpus is missing) make one case that does (an empty list would skip as pytest's
    bare "got empty parameter set")."""
    import pytest

    if not paths:
        return [pytest.param(None, id="no-corpus", marks=pytest.mark.skip(reason=corpus_missing()))]
    return [
        pytest.param(
            path,
            id=path.name.split(".")[0][:width],
            marks=()
            if path.is_file()
            else pytest.mark.skip(reason=corpus_missing(path.name if CORPUS.is_dir() else None)),
        )
        for path in paths
    ]


WHITESPACE_PADDING = (" ", "\t", "\u00a0", "\u3000")
"""Spaces, tabs, NBSP and U+3000: a megabyte of any of them overflowed tiktoken's stack."""


def padded_report(pad: str) -> str:
    """A tool's report padded with a megabyte of `pad` between its two lines of figures."""
    return "rows: 42" + pad * 1_000_000 + "total: 42"


def call(call_id: str, name: str, **args: Any) -> Msg:
    """An assistant message that calls one tool."""
    return Msg(role="assistant", content=[ToolCallBlock(id=call_id, name=name, input=args)])


# Two tools for a scripted agent whose record a test reads: a big result (3000 lines, more than
# a 300-token tool_result_limit, so it is offloaded) and a tool that fails. Their docstrings are
# the descriptions the agent records.
def fetch_log(log: str) -> str:
    """Fetch a log file.

    Args:
        log: which log.
    """
    return "\n".join(f"{i:05d} INFO request served in {i % 97} ms" for i in range(3000)) + log


def explode(reason: str) -> str:
    """Fail on purpose.

    Args:
        reason: why.
    """
    raise RuntimeError(f"boom: {reason}")


# The tool of the compaction and pin tests: 60 words a call, so a few calls make a context
# worth compacting.
def probe(i: int) -> str:
    """Probe one thing.

    Args:
        i: which.
    """
    return f"probe {i}: " + "word " * 60


def tokenized_ids(counter: Any, monkeypatch: Any) -> list[str]:
    """The ids of the messages `counter` tokenizes from now on, in order (it still counts them):
    how a test sees which messages a count cost, and that a second count costs none."""
    tokenized: list[str] = []
    count_message = counter.count_message

    def spy(msg: Msg) -> int:
        tokenized.append(msg.id)
        return count_message(msg)

    monkeypatch.setattr(counter, "count_message", spy)
    return tokenized


def pipeline_run(
    offloader: Any,
    *managers: Any,
    window: int,
    model: Any = None,
    post: tuple[Any, ...] = (),
    **config: Any,
) -> PipelineRun:
    """A `ContextPipeline` of these pre-LLM managers (and `post` post-tool ones) in a window of
    `window` tokens, bound to a `Compressor` of session `s1` on `offloader` that counts fast."""
    pipeline = ContextPipeline(
        pre_llm=managers, post_tool=post, config=ContextConfig(context_window=window, **config)
    )
    compressor = Compressor(
        pipeline.config,
        model=model,
        offloader=offloader,
        session_id="s1",
        counter=get_token_counter(exact=False),
    )
    return pipeline.bind(compressor)


def probe_turn(i: int, output: str | None = None) -> list[Msg]:
    """Step `i` of an agent: its call of the tool `probe` and the result (`result i`)."""
    return [
        Msg(role="assistant", content=[ToolCallBlock(id=f"c{i}", name="probe", input={"i": i})]),
        Msg(
            role="tool",
            content=[ToolResultBlock(id=f"c{i}", name="probe", output=output or f"result {i}")],
        ),
    ]


class AppendCounting(LocalWorkspace):
    """A real `LocalWorkspace` that notes the kinds of each append to events.jsonl
    (`record_events`), in `appends`: what is written in one write and one flush."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.appends: list[list[str]] = []

    async def record_events(
        self, session_id: str, events: Sequence[tuple[str, dict[str, Any]]]
    ) -> None:
        self.appends.append([kind for kind, _ in events])
        await super().record_events(session_id, events)


class OffloaderOnly:
    """A custom offloader with only the three `Offloader` methods (no event log, no state, no
    read-back), storing through a real `LocalWorkspace`."""

    def __init__(self, inner: LocalWorkspace) -> None:
        self.inner = inner

    async def offload_context(self, session_id: str, msgs: Any) -> Any:
        return await self.inner.offload_context(session_id, msgs)

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        return await self.inner.offload_tool_result(session_id, tool_result)

    async def offload_data_block(self, block: Any) -> Any:
        return await self.inner.offload_data_block(block)


class EventsOneByOne(OffloaderOnly):
    """A custom store with the three `Offloader` methods and `EventLog`'s two (no
    `record_events`: each event is its own write)."""

    async def record_event(self, session_id: str, kind: str, **fields: Any) -> None:
        await self.inner.record_event(session_id, kind, **fields)

    async def read_events(self, session_id: str) -> list[dict[str, Any]]:
        return await self.inner.read_events(session_id)


class FullDisk:
    """A store every write of which fails (a full disk): the three `Offloader` methods and
    the event log, one event at a time."""

    async def offload_context(self, session_id: str, msgs: Any) -> Any:
        raise OSError("no space left on device")

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        raise OSError("no space left on device")

    async def offload_data_block(self, block: Any) -> Any:
        return block

    async def record_event(self, session_id: str, kind: str, **fields: Any) -> None:
        raise OSError("no space left on device")

    async def read_events(self, session_id: str) -> list[dict[str, Any]]:
        return []

    async def write_state(self, session_id: str, state: dict[str, Any]) -> str:
        raise OSError("no space left on device")

    async def read_state(self, session_id: str) -> dict[str, Any] | None:
        return None


async def lease_taken_over(url: str, session: str, ttl: float) -> tuple[Any, Any]:
    """A SQLite workspace on `url` whose lease of `session` (of time to live `ttl`) lapsed
    unrenewed while its event loop was blocked, and was taken over by another writer (in a
    thread of its own, as another process would): its next write of the session raises
    `SessionBusyError`. The workspace and its lease, to release at the end."""
    from ctxoffload import SqlWorkspace

    mine, theirs = SqlWorkspace(url), SqlWorkspace(url)
    lease = await mine.acquire_lease(session, agent="A", ttl=ttl)
    time.sleep(ttl * 1.5)  # this loop blocked: the lease lapses unrenewed

    def take_over() -> None:
        import asyncio

        asyncio.run(theirs.acquire_lease(session, agent="B", ttl=ttl))

    other = threading.Thread(target=take_over)
    other.start()
    other.join()
    return mine, lease


async def stops_when_taken_over(
    drive: Callable[[Any], Any],
    message: str,
    folder: Path,
    monkeypatch: Any,
    caplog: Any,
) -> None:
    """Check that `drive(workspace)`, whose workspace's lease of session "s1" was taken over
    (`lease_taken_over`, a time to live of 0.4 s), raises `SessionBusyError` naming the new
    holder, and never logs `message` (its place's word for a store's failure)."""
    import logging

    import pytest

    import ctxoffload.workspace._lease as lease_module
    from ctxoffload import SessionBusyError

    ttl = 0.4
    monkeypatch.setattr(lease_module, "DEFAULT_LEASE_TTL", ttl)
    mine, lease = await lease_taken_over(f"sqlite:///{folder / 'ws.db'}", "s1", ttl)
    with (
        caplog.at_level(logging.WARNING, logger="ctxoffload"),
        pytest.raises(SessionBusyError, match="agent 'B'"),
    ):
        await drive(mine)
    assert message not in caplog.text  # not said as a store's failure
    await lease.release()


def plausible_session(n: int, words: int = 12) -> list[Msg]:
    """A plausible session of n messages: requests, tool calls with results, replies."""
    msgs: list[Msg] = []
    for i in range(n):
        kind = i % 4
        filler = " ".join(f"w{i}x{j}" for j in range(words))
        if kind == 0:
            msgs.append(Msg(role="user", content=f"request {i}: {filler}"))
        elif kind == 1:
            msgs.append(
                Msg(
                    role="assistant",
                    content=[ToolCallBlock(id=f"c{i}", name="grep", input={"pattern": f"p{i}"})],
                )
            )
        elif kind == 2:
            msgs.append(
                Msg(
                    role="tool",
                    content=[ToolResultBlock(id=f"c{i - 1}", name="grep", output=filler)],
                )
            )
        else:
            msgs.append(Msg(role="assistant", content=f"statement {i}: {filler}"))
    return msgs


# A small PNG-looking payload: the signature, then bytes that are not text.
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def png_image(
    width: int,
    height: int,
    *,
    depth: int = 8,
    colour: int = 0,
    rows: bytes | None = None,
    level: int = 6,
) -> bytes:
    """A real PNG (signature, IHDR, one IDAT, IEND, each chunk with its CRC) of `width` x
    `height` pixels: grey (`colour` 0) or RGB (2) at `depth` bits, its pixels `rows` (default:
    a mid grey, a filter byte before each row), compressed at zlib `level`. With `rows` given,
    the header may claim any size at all."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + body))
        return struct.pack(">I", len(body)) + kind + body + crc

    if rows is None:
        channels = 3 if colour == 2 else 1
        rows = (b"\x00" + b"\x80" * ((width * channels * depth + 7) // 8)) * height
    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, level))
        + chunk(b"IEND", b"")
    )


def image_block(
    raw: bytes = PNG, media_type: str = "image/png", name: str | None = None
) -> DataBlock:
    """A data block carrying `raw` inline, as base64."""
    source = Base64Source(media_type=media_type, data=base64.b64encode(raw).decode())
    return DataBlock(source=source, name=name)


def user_msgs(*texts: str) -> list[Msg]:
    """One user message per text."""
    return [Msg(role="user", content=text) for text in texts]


class MinimalOffloader:
    """A custom backend with only the three methods of `Offloader`; it remembers the calls."""

    def __init__(self) -> None:
        self.contexts: list[tuple[str, list[Any]]] = []
        self.tool_results: list[tuple[str, Any]] = []

    async def offload_context(self, session_id: str, msgs: Sequence[Any]) -> str:
        self.contexts.append((session_id, list(msgs)))
        return f"db://{session_id}/context"

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        self.tool_results.append((session_id, tool_result))
        return f"db://{session_id}/result/{len(self.tool_results)}"

    async def offload_data_block(self, block: Any) -> Any:
        return block


# Imports each name in a child forked from an interpreter that has imported nothing of the
# package, so every name is the first thing imported; prints the failures as JSON.
FIRST_IMPORTS = """
import json, os, sys, traceback
# What ctxoffload stands on is imported once, before the forks: each fork then pays for
# ctxoffload's own modules only, whose order of first import is what is checked.
import asyncio, dataclasses, logging, re, typing, pydantic, pydantic_core
groups = json.loads(sys.argv[1])
failed = {}
for package, names in groups:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            module = __import__(package, fromlist=names[:1])
            for name in names:
                getattr(module, name)
            message = b""
        except BaseException:
            message = traceback.format_exc().encode()
        os.write(write, message)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read()
    os.waitpid(pid, 0)
    if message:
        for name in names:
            failed[f"from {package} import {name}"] = message.decode().strip().splitlines()[-1]
print(json.dumps(failed))
"""


def public_names(package: str) -> list[list[str]]:
    """`[package, name, source]` for each name of the package's `__all__`: `source` is the
    module that defines it, followed through the lazy maps of the packages on the way (names
    that come from one module share one first import), or the name itself where that cannot
    be known without importing it."""
    done = subprocess.run(
        [sys.executable, "-c", _SOURCES, package], capture_output=True, text=True, check=True
    )
    return [[package, name, source] for name, source in json.loads(done.stdout)]


# Follows each exported name through the packages' lazy maps (`_lazy.lazy_exports` keeps
# them on `__getattr__.exports`) to the module that defines it, importing only packages.
_SOURCES = """
import importlib, importlib.util, json, sys
package = importlib.import_module(sys.argv[1])


def source(module, name):
    exports = getattr(getattr(module, "__getattr__", None), "exports", {})
    target = exports.get(name)
    if target is None:
        return None
    full = importlib.util.resolve_name(target, module.__name__)
    spec = importlib.util.find_spec(full)
    if spec is not None and spec.submodule_search_locations is not None:
        deeper = source(importlib.import_module(full), name)
        return deeper or full
    return full


print(json.dumps([[n, source(package, n) or n] for n in package.__all__]))
"""


def first_import_failures(names: list[list[str]]) -> dict[str, str]:
    """`from package import name` for each `[package, name]` or `[package, name, source]`,
    as the first import of a fresh interpreter (one per package and source: the names a
    package imports from one module share its first import); the last line of each
    failure, by import."""
    groups: dict[tuple[str, str], list[str]] = {}
    for package, name, *source in names:
        groups.setdefault((package, source[0] if source else name), []).append(name)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            FIRST_IMPORTS,
            json.dumps([[package, group] for (package, _), group in groups.items()]),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    failures: dict[str, str] = json.loads(done.stdout)
    return failures


# The tool names a notice or a summary could give: the reader tools ctxoffload knows and the
# names other frameworks use for theirs.
KNOWN_TOOL_NAMES = frozenset(
    {"Read", "Grep", "Glob", "retrieve_offloaded_content", "view_text_file", "read_file"}
)
_NOTE = re.compile(
    r"<system-reminder>.*?(?:</system-reminder>|$)|<context_summary>.*?</context_summary>",
    re.DOTALL,
)


def notes_in(text: str) -> list[str]:
    """The notices (`<system-reminder>`) and summaries (`<context_summary>`) in `text`."""
    return _NOTE.findall(text)


def tools_named(note: str, also: Sequence[str] = ()) -> set[str]:
    """The tools a notice or summary names: each known name (and each of `also`) written as
    a word of its own (`Read(path=...)`, `your view_text_file tool`, `Read offset=3`)."""
    return {
        name
        for name in (*KNOWN_TOOL_NAMES, *also)
        if re.search(rf"(?<![\w/.-]){re.escape(name)}(?![\w/.-])", note)
    }


class ChildLines:
    """The lines a child process prints, read by a thread, so a test can wait for the next
    one with a deadline (a plain `readline` would wait forever on a child that hangs)."""

    def __init__(self, stream: IO[str]) -> None:
        self._lines: queue.Queue[str] = queue.Queue()

        def pump() -> None:
            for line in stream:
                self._lines.put(line)
            self._lines.put("")  # end of output

        threading.Thread(target=pump, daemon=True).start()

    def next(self, deadline: float) -> str:
        """The next line, waiting until `deadline` (`time.monotonic()`); fails the test when
        the child ends its output first or the deadline passes (a safety net for a machine so
        loaded that the child never writes: the test counts lines, not time)."""
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError("the child printed nothing more before the deadline") from None
        assert line, "the child ended its output"
        return line

    def rest(self, deadline: float) -> list[str]:
        """Every whole line left until the child's output ends (call it after the child
        exits). A last line without its newline, cut short by a kill landing between the
        writes of one `print`, is not a line the child finished: it is left out."""
        out: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError("the child's output did not end by the deadline") from None
            if not line:
                return out
            if line.endswith("\n"):
                out.append(line)


def on_a_terminal(
    argv: Sequence[str],
    env: dict[str, str],
    *,
    stderr_too: bool = False,
    timeout: float = 120,
    columns: int | None = None,
) -> tuple[int, bytes]:
    """Run `python -m ctxoffload ARGV` with stdout (and stderr, when `stderr_too`) on a
    pseudo-terminal, as a person's shell runs it (`columns` wide, when given); its exit
    status and all it wrote there."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    controller, terminal = pty.openpty()
    if columns is not None:
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    command = [sys.executable, "-m", "ctxoffload", *argv]
    stderr = terminal if stderr_too else subprocess.DEVNULL
    process = subprocess.Popen(command, stdout=terminal, stderr=stderr, env=env)
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the terminal's last writer is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    return process.wait(timeout=timeout), b"".join(chunks)


@contextlib.contextmanager
def ctrl_c_reaches_children() -> Iterator[None]:
    """Children started inside get SIGINT as a terminal gives it, even if this process ignores it.

    A shell starts a background job (`pytest &`, nohup) with SIGINT ignored, and an ignored
    signal stays ignored across fork and exec: `watch` would never see the Ctrl-C these tests
    send, and each test would wait out its whole PATIENCE. A handled signal is reset to the
    default in the child, so SIGINT is handled here while the child starts.
    """
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def snapshot_tree(root: str | os.PathLike[str]) -> dict[str, bytes | None]:
    """Every path under `root` (relative), with file contents; directories map to None: taken
    before and after, it shows that something wrote nothing there."""
    tree: dict[str, bytes | None] = {}
    if not os.path.exists(root):
        return tree
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            tree[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                tree[os.path.relpath(path, root)] = f.read()
    return tree


def makes_unnamed_files(folder: str | os.PathLike[str]) -> bool:
    """Whether files with no name can be made in `folder` (Linux's `O_TMPFILE`, on a file
    system that has it), as the workspace makes tool results there; elsewhere it uses a
    temporary name."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag:
        return False
    try:
        os.close(os.open(folder, flag | os.O_WRONLY, 0o600))
    except OSError:
        return False
    return True


async def chain_of_sub_agents(workdir: str | os.PathLike[str], length: int) -> list[str]:
    """`length` sessions in a new workspace at `workdir`, each a sub-agent of the one before
    (`s0000` the first), recorded as `Agent.as_tool` records them: the child's
    `session_start` names its `parent` (session, agent, step, tool call)."""
    workspace = LocalWorkspace(workdir, fsync=False)
    await workspace.initialize()
    names = [f"s{n:04d}" for n in range(length)]
    for parent, session in zip([None, *names[:-1]], names, strict=True):
        link = {"session": parent, "agent": "worker", "step": 1, "tool_id": "call_1"}
        await workspace.record_event(
            session,
            "session_start",
            agent="worker",
            **({"parent": link} if parent is not None else {}),
        )
    return names


def unreleased_leases(root: str | os.PathLike[str]) -> list[str]:
    """The `lease.json` files under `root` whose holder never released them: an agent a
    script or a page of the docs left open (run again, it would take the lease over)."""
    found: list[str] = []
    for folder, _, files in os.walk(root):
        if "lease.json" in files:
            path = os.path.join(folder, "lease.json")
            with open(path, encoding="utf-8") as lease:
                if "released" not in json.load(lease):
                    found.append(os.path.relpath(path, root))
    return sorted(found)


def delimiters_in(text: str, delimiter: str) -> int:
    """How many times `delimiter` occurs in `text` as a reader would take it: a tag
    (`</artifact_index>`) in any case and spacing, with or without attributes; any other
    mark in any case."""
    tag = re.fullmatch(r"<(/?)([A-Za-z][\w-]*)>", delimiter)
    if tag is None:
        return len(re.findall(re.escape(delimiter), text, re.IGNORECASE))
    closing, name = tag.groups()
    slash = r"\s*/\s*" if closing else r"\s*(?!/)"
    return len(re.findall(rf"<{slash}{re.escape(name)}(?![\w-])[^>]*>", text, re.IGNORECASE))


LEASE_WORKER = os.path.join(os.path.dirname(__file__), "workspace", "lease_worker.py")


def start_lease_worker(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start `tests/workspace/lease_worker.py ARGS` (see its docstring) as a real process."""
    return subprocess.Popen(
        [sys.executable, LEASE_WORKER, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def racing_start(folder: Path, racers: int) -> str:
    """The START_AT of lease workers that must begin together: a barrier in a new folder
    under `folder` that each passes once its imports are done and all `racers` are there."""
    barrier = Path(tempfile.mkdtemp(prefix="barrier-", dir=folder))
    return f"barrier={barrier}/{racers}"


def lease_worker_result(process: subprocess.Popen[str]) -> dict[str, Any]:
    """The JSON line a lease worker printed last, once it has ended without error."""
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def wait_held(process: subprocess.Popen[str]) -> dict[str, Any]:
    """Wait for a lease worker in `hold` mode to say that it holds its lease."""
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.stderr.read() if process.stderr else "no output"
    return json.loads(line)  # type: ignore[no-any-return]


def forced_tags(monkeypatch: Any, *tags: str) -> list[str]:
    """Make the next new session ids (`ctxoffload.workspace.new_session`: sub-agents, forks
    of a busy session) end in `tags`, in order, then random again, so that a collision
    happens on purpose rather than once in about 580 draws. Returns the tags not used yet."""
    from ctxoffload.workspace import _new_session

    left = list(tags)
    random_tag = _new_session.random_tag
    monkeypatch.setattr(_new_session, "random_tag", lambda: left.pop(0) if left else random_tag())
    return left


SQL_TABLES = {"schema_version", "sessions", "files", "lines", "message_keys", "data", "leases"}
"""The tables of a `SqlWorkspace` (schema version 1), on SQLite and PostgreSQL alike."""


def pipe_lines(stream: object) -> queue.Queue[str]:
    """Lines of a child's pipe as they come; the pump ends at EOF, when the process has
    exited."""
    found: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        try:
            for line in stream:  # type: ignore[attr-defined]
                found.put(line)
        except (ValueError, OSError):  # closed under us after a failure: nothing to read
            pass

    threading.Thread(target=pump, daemon=True).start()
    return found


def wait_for_line(
    lines: queue.Queue[str], needle: str, seen: list[str], patience: float = 60.0
) -> None:
    """Take lines into `seen` until one holds `needle` (`patience` seconds a line at most:
    a bound so a loaded machine cannot hang the suite, not a speed check)."""
    while not any(needle in line for line in seen):
        try:
            seen.append(lines.get(timeout=patience))
        except queue.Empty:
            raise AssertionError(f"{needle!r} never appeared; saw {seen!r}") from None


def megabyte_output(number: int) -> str:
    """About a megabyte of log lines, none like another number's."""
    return "".join(f"{number} {i:06d} INFO export batch {i} done\n" for i in range(30_000))


def retained_per_run(run: Callable[[int], None], runs: int = 6) -> float:
    """The bytes ctxoffload's code allocated in each call of `run` (numbered from 0) that are
    still allocated after it, on average over `runs` calls, after two calls to warm up: what
    a door object serving a server keeps per conversation (tracemalloc, after a collection;
    only what ctxoffload's own lines allocated, not a host's or another thread's caches)."""
    import gc
    import tracemalloc

    import ctxoffload

    ours = tracemalloc.Filter(True, str(Path(ctxoffload.__file__).parent / "*"))
    run(-1)
    run(-2)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces([ours])

        def grown() -> int:
            gc.collect()
            after = tracemalloc.take_snapshot().filter_traces([ours])
            return sum(stat.size_diff for stat in after.compare_to(before, "filename"))

        for number in range(runs):
            run(number)
        # A door lets go of a run that is over on a worker of its own loop, once the
        # collector has dropped the run (`HostRuns._say_let_go_soon`), and after the lock
        # a run's end holds while its lease goes: measured once nothing more goes for half
        # a second (a busy machine may take that long to run the worker), not at once.
        least, still_since = grown(), time.monotonic()
        while time.monotonic() - still_since < 0.5:
            time.sleep(0.05)
            now = grown()
            if now < least:
                least, still_since = now, time.monotonic()
    finally:
        tracemalloc.stop()
    return least / runs


class Syncs:
    """Stands in for `os.fsync`: syncs, and notes per file (by path) the syncs and the size
    each covered."""

    def __init__(self, real: Callable[[int], None]) -> None:
        self.real = real
        self.count: dict[str, int] = {}
        self.covered: dict[str, int] = {}

    def __call__(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        self.real(fd)
        path = os.readlink(f"/proc/self/fd/{fd}")
        self.count[path] = self.count.get(path, 0) + 1
        self.covered[path] = max(self.covered.get(path, 0), size)

    def of(self, path: Path) -> int:
        return self.count.get(str(path), 0)


def needle_sessions(workdir: Path, names: Sequence[str]) -> LocalWorkspace:
    """A workspace (unsynced) whose sessions each hold a tool result and a committed context
    log, both with `needle` in them: what `ctxoffload grep`'s tests search."""
    import asyncio

    ws = LocalWorkspace(workdir, fsync=False)

    async def fill() -> None:
        for name in names:
            output = f"needle in {name}\nno match\n"
            await ws.offload_tool_result(name, ToolResultBlock(id="c1", name="f", output=output))
            await ws.offload_context(
                name,
                [Msg(role="user", content=f"needle said in {name}"), Msg(role="user", content="x")],
            )

    asyncio.run(fill())
    return ws
