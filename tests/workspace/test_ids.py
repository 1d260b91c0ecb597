"""Safe names: hostile session ids are refused before any I/O; tool-call ids never collide."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload import InMemoryWorkspace, InvalidSessionId, LocalWorkspace, Msg, SqlWorkspace
from ctxoffload._disk.ids import (
    SESSION_ID_PATTERN,
    is_session_id,
    session_id_for,
    session_ids_among,
    tool_file_stem,
    validate_session_id,
)
from ctxoffload.workspace import Workspace
from helpers import examples

HOSTILE_SESSION_IDS: list[str] = [
    "",
    ".",
    "..",
    "...",
    "../x",
    "../../etc",
    "x/..",
    "x/../..",
    "a/b",
    "a/",
    "/a",
    "a//b",
    "/",
    "/etc/passwd",
    "/tmp/x",
    "a\\b",
    "..\\x",
    "\\",
    "C:\\x",
    "C:",
    "a\x00b",
    "\x00",
    "x\x00",
    "x" * 129,
    "x" * 10_000,
    "\u2215etc",  # division slash
    "a\u2215b",
    "\uff0e\uff0e",  # fullwidth full stops
    "\u2024\u2024",  # one dot leader, twice
    "\u2025",  # two dot leader
    "\uff0fetc",  # fullwidth solidus
    "a\u200bb",  # zero width space
    "\uff41\uff42\uff43",  # fullwidth 'abc'
    "caf\u00e9",
    "\u0430",  # Cyrillic a
    "session\n",
    "a\nb",
    "\n",
    "a\rb",
    "a\tb",
    " ",
    " a",
    "a ",
    "a b",
    "~",
    "~root",
    "$HOME",
    "${HOME}",
    "-rf",
    "--help",
    "-",
    ".hidden",
    ".git",
    "*",
    "?",
    "a*",
    "[a]",
    "a:b",
    "a;rm -rf",
    "`id`",
    "$(id)",
    "a|b",
    "a>b",
    "%2e%2e",
    "%2F",
    "\udcff",
    "\ud800",
    "\U0001f600",
    "sess\x7f",
    "file://x",
]

NON_STR_SESSION_IDS: list[Any] = [
    None,
    1,
    1.5,
    b"abc",
    bytearray(b"abc"),
    ["a"],
    ("a",),
    {"a": 1},
    Path("a"),
    object(),
]

PLAIN_SESSION_IDS = ["a", "A", "0", "_", "con", "nul", "a.b", "a..b", "a-", "a.", "run-42_v1.2"]

Call = Callable[[Any, Any], Any]

TOOL_RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "output"}

# Every public method that takes a session id, on both workspaces.
SESSION_METHODS: dict[str, Call] = {
    "offload_context": lambda ws, sid: ws.offload_context(
        sid, msgs=[Msg(role="user", content="hi")]
    ),
    "offload_tool_result": lambda ws, sid: ws.offload_tool_result(sid, TOOL_RESULT),
    "record_event": lambda ws, sid: ws.record_event(sid, "note", detail="x"),
    "write_state": lambda ws, sid: ws.write_state(sid, {"messages": []}),
    "read_context": lambda ws, sid: ws.read_context(sid),
    "read_events": lambda ws, sid: ws.read_events(sid),
    "read_state": lambda ws, sid: ws.read_state(sid),
    "list_files": lambda ws, sid: ws.list_files(sid),
    "purge_session": lambda ws, sid: ws.purge_session(sid),
    "context_path": lambda ws, sid: ws.context_path(sid),
}
LOCAL_ONLY_METHODS: dict[str, Call] = {
    "session_dir": lambda ws, sid: ws.session_dir(sid),
    "events_path": lambda ws, sid: ws.events_path(sid),
    "state_path": lambda ws, sid: ws.state_path(sid),
}
METHOD_CASES = [("local", name) for name in [*SESSION_METHODS, *LOCAL_ONLY_METHODS]] + [
    (kind, name) for kind in ("memory", "sqlite") for name in SESSION_METHODS
]


def _make(kind: str, workdir: Path) -> Workspace:
    if kind == "sqlite":  # the file beside the workdir: a refusal creates neither
        return SqlWorkspace(f"sqlite:///{workdir}.db")
    return LocalWorkspace(workdir) if kind == "local" else InMemoryWorkspace()


def _written(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A tree's snapshot without SQLite's shared-memory index (`*.db-shm`), where readers
    note what they read: the rest is what was written."""
    return {name: body for name, body in snapshot.items() if not name.endswith("-shm")}


async def _call(ws: Workspace, method: str, session_id: Any) -> None:
    result = {**SESSION_METHODS, **LOCAL_ONLY_METHODS}[method](ws, session_id)
    if inspect.isawaitable(result):
        await result


async def _ids_not_refused(ws: Workspace, method: str, ids: list[Any]) -> list[Any]:
    """The ids that `method` did NOT refuse with InvalidSessionId (should be none)."""
    accepted = []
    for session_id in ids:
        try:
            await _call(ws, method, session_id)
        except InvalidSessionId:
            continue
        accepted.append(session_id)
    return accepted


def test_hostile_id_list_is_long_enough() -> None:
    assert len(set(HOSTILE_SESSION_IDS)) >= 40


def _case_id(value: object) -> str:
    # repr of a bare object() holds its address, which differs between pytest-xdist workers.
    return "object()" if type(value) is object else repr(value)


@pytest.mark.parametrize("session_id", HOSTILE_SESSION_IDS + NON_STR_SESSION_IDS, ids=_case_id)
def test_validate_session_id_rejects_hostile_id(session_id: Any) -> None:
    with pytest.raises(InvalidSessionId):
        validate_session_id(session_id)


@pytest.mark.parametrize("session_id", [*PLAIN_SESSION_IDS, "x" * 128])
def test_validate_session_id_accepts_plain_name(session_id: str) -> None:
    assert validate_session_id(session_id) == session_id


# Names near the pattern's edges: each allowed character, look-alikes, lengths 128 and 129.
_NAME_CHARACTERS = st.sampled_from(
    [*"Az09_.-", "/", "\n", " ", "\u2215", "\uff0e", "\u0131", "\u212a", "\x00", "é"]
)


@pytest.mark.slow
@settings(max_examples=examples(500))
@given(
    st.one_of(
        st.text(_NAME_CHARACTERS, max_size=130),
        st.builds(lambda n, tail: "a" * n + tail, st.integers(120, 130), st.text(max_size=2)),
        st.text(max_size=20),
    )
)
def test_a_session_id_is_checked_as_its_pattern_reads_it(name: str) -> None:
    """`is_session_id` reads the characters themselves (no `re` at start-up), as
    `SESSION_ID_PATTERN` matched whole does (the pattern other readers build on)."""
    plain = re.fullmatch(SESSION_ID_PATTERN, name) is not None
    assert is_session_id(name) is plain
    assert (tool_file_stem(name) == name) is (
        re.fullmatch(r"[A-Za-z0-9_-]{1,100}", name) is not None
    )


@pytest.mark.parametrize("hostile", [*HOSTILE_SESSION_IDS, "-x", "x" * 129, ".hidden", "a b"])
def test_a_name_that_is_no_session_id_is_left_out_among_plain_ones(hostile: str) -> None:
    """`session_ids_among` judges a list whose names are all session ids at once: one name
    that is not (whatever makes it not one) sends it back to judging each."""
    plain = ["a", "s00001", "Z-9.x_", "x" * 128]
    for names in ([*plain, hostile], [hostile, *plain], [plain[0], hostile, *plain[1:]]):
        assert session_ids_among(names) == [n for n in names if is_session_id(n)]
        assert hostile not in session_ids_among(names) or is_session_id(hostile)


@given(
    st.lists(
        st.one_of(
            st.from_regex(SESSION_ID_PATTERN, fullmatch=True),
            st.text(alphabet="ab.-_/ \u00e9\x00", max_size=4),
            st.sampled_from(HOSTILE_SESSION_IDS),
        ),
        max_size=8,
    )
)
def test_session_ids_among_names_are_those_is_session_id_takes(names: list[str]) -> None:
    assert session_ids_among(names) == [n for n in names if is_session_id(n)]


def test_session_id_error_names_the_value_and_the_fix() -> None:
    with pytest.raises(InvalidSessionId, match=r"'\.\./x'.*letters, digits"):
        validate_session_id("../x")


def test_session_id_error_for_huge_id_is_short() -> None:
    with pytest.raises(InvalidSessionId) as caught:
        validate_session_id("x" * 10_000)
    assert "10000 characters" in str(caught.value)
    assert len(str(caught.value)) < 300


def test_session_id_may_not_start_with_a_dash() -> None:
    # `ctxoffload show -rf` would be read as an option by the CLI.
    with pytest.raises(InvalidSessionId):
        validate_session_id("-rf")
    assert validate_session_id("r-f") == "r-f"


@pytest.mark.parametrize(("kind", "method"), METHOD_CASES)
async def test_hostile_session_id_is_refused_before_any_io(
    kind: str, method: str, tmp_path: Path, tree: Callable[[Path], Any]
) -> None:
    workdir = tmp_path / "ws"
    ws = _make(kind, workdir)
    before = tree(tmp_path)
    accepted = await _ids_not_refused(ws, method, HOSTILE_SESSION_IDS + NON_STR_SESSION_IDS)
    assert accepted == []
    assert not workdir.exists()
    assert tree(tmp_path) == before
    assert await ws.list_sessions() == []


@pytest.mark.parametrize(("kind", "method"), METHOD_CASES)
async def test_hostile_session_id_leaves_a_populated_workspace_unchanged(
    kind: str, method: str, tmp_path: Path, tree: Callable[[Path], Any]
) -> None:
    # Unvalidated, purge_session('..') would delete the whole workspace and
    # offload_tool_result('../..', ...) would write next to it.
    workdir = tmp_path / "ws"
    ws = _make(kind, workdir)
    await ws.offload_context("victim", msgs=[Msg(role="user", content="keep me")])
    await ws.offload_tool_result("victim", TOOL_RESULT)
    (tmp_path / "outside.txt").write_text("outside")
    before = _written(tree(tmp_path))
    held_before = await ws.read_context("victim")
    accepted = await _ids_not_refused(ws, method, HOSTILE_SESSION_IDS + NON_STR_SESSION_IDS)
    assert accepted == []
    assert _written(tree(tmp_path)) == before
    assert await ws.read_context("victim") == held_before
    assert await ws.list_sessions() == ["victim"]


@pytest.mark.parametrize("kind", ["local", "memory", "sqlite"])
@pytest.mark.parametrize("session_id", PLAIN_SESSION_IDS)
async def test_plain_session_id_gets_its_own_directory(
    kind: str, session_id: str, workdir: Path
) -> None:
    ws = _make(kind, workdir)
    ref = await ws.offload_context(session_id, msgs=[Msg(role="user", content="hi")])
    assert await ws.list_sessions() == [session_id]
    if isinstance(ws, LocalWorkspace):
        assert Path(ref).parent == workdir / "sessions" / session_id
        assert Path(ref).is_file()
    elif isinstance(ws, SqlWorkspace):
        assert ref == f"sqlite:///{workdir}.db/sessions/{session_id}/context.jsonl"
    else:
        assert ref == f"memory://workspace/sessions/{session_id}/context.jsonl"


@pytest.mark.parametrize("name", ["..", "a/b", "", "\x00"])
def test_in_memory_workspace_name_is_validated(name: str) -> None:
    with pytest.raises(InvalidSessionId):
        InMemoryWorkspace(name)


# -- tool-call ids ----------------------------------------------------------------------------

HOSTILE_TOOL_IDS = [
    "",
    ".",
    "..",
    "../x",
    "../../etc/passwd",
    "/abs",
    "a/b",
    "a\\b",
    "\x00",
    "a\x00b",
    "x" * 101,
    "x" * 10_000,
    "\u2215",
    "\uff0e\uff0e",
    "a b",
    "a\nb",
    "call_1.2",
    "call_1",
    "call-1",
    "call_1.txt",
    "tool_result-call_1",
    "\ud800",
    "\udcff",
    "\U0001f600",
]

# Any text, text rich in path syntax and separators, and text with lone surrogates (which
# st.text() leaves out by default).
TOOL_IDS = st.one_of(
    st.text(),
    st.text(alphabet=st.sampled_from("./\\\x00 ._-aA0\n")),
    st.text(alphabet=st.characters(categories=["Cs", "Lu", "Nd", "Po", "Cc", "Zs"])),
    st.sampled_from(HOSTILE_TOOL_IDS),
    st.text(min_size=90, max_size=300),
)


def _check_stem(stem: str) -> None:
    assert stem
    assert "/" not in stem and "\\" not in stem and "\x00" not in stem
    assert stem not in (".", "..")
    assert not stem.startswith(".")
    name = f"tool_result-{stem}.txt"
    assert len(name.encode("utf-8")) <= 255


@pytest.mark.parametrize("tool_id", HOSTILE_TOOL_IDS)
def test_tool_file_stem_is_a_safe_file_name(tool_id: str) -> None:
    _check_stem(tool_file_stem(tool_id))


def test_tool_file_stem_keeps_plain_ids_as_they_are() -> None:
    assert tool_file_stem("call_abc123") == "call_abc123"
    assert tool_file_stem("toolu_01A-b") == "toolu_01A-b"


def test_tool_file_stem_distinguishes_ids_that_clean_to_the_same_text() -> None:
    ids = ["a/b", "a\\b", "a b", "a_b", "a__b", "a.b", "a\x00b", "a\u2215b"]
    assert len({tool_file_stem(i) for i in ids}) == len(ids)


def test_tool_file_stem_distinguishes_long_ids_with_a_shared_prefix() -> None:
    prefix = "x" * 200
    assert tool_file_stem(prefix + "1") != tool_file_stem(prefix + "2")


def test_tool_file_stem_distinguishes_surrogate_pair_from_the_character() -> None:
    assert tool_file_stem("\ud83d\ude00") != tool_file_stem("\U0001f600")


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(st.lists(TOOL_IDS, min_size=2, max_size=8, unique=True))
def test_tool_file_stem_never_maps_two_ids_to_one_stem(tool_ids: list[str]) -> None:
    stems = [tool_file_stem(i) for i in tool_ids]
    for stem in stems:
        _check_stem(stem)
    assert len(set(stems)) == len(tool_ids)


@pytest.mark.slow
@settings(max_examples=examples(150), deadline=None)
@given(tool_ids=st.lists(TOOL_IDS, min_size=1, max_size=4, unique=True))
def test_hostile_tool_ids_stay_inside_the_session_and_never_share_a_file(
    tmp_path_factory: pytest.TempPathFactory, tool_ids: list[str]
) -> None:
    root = tmp_path_factory.mktemp("toolids")
    workdir = root / "ws"
    ws = LocalWorkspace(workdir, fsync=False)
    # The same content for every id: only the names can keep the files apart.
    content = "the same output\n"

    async def offload_all() -> list[str]:
        return [
            await ws.offload_tool_result(
                "s", {"role": "tool", "tool_call_id": tool_id, "content": content}
            )
            for tool_id in tool_ids
        ]

    paths = asyncio.run(offload_all())
    session_dir = workdir / "sessions" / "s"
    assert len(set(paths)) == len(tool_ids)
    for path in map(Path, paths):
        assert path.parent == session_dir
        assert path.name.startswith("tool_result-")
        assert path.name.endswith(".txt")
        assert len(path.name.encode("utf-8")) <= 255
        assert path.read_bytes() == content.encode()
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*")}
    expected_files = {Path(p).relative_to(root).as_posix() for p in paths}
    assert on_disk == {
        "ws",
        "ws/sessions",
        "ws/sessions/s",
        "ws/sessions/s/events.jsonl",
        *expected_files,
    }


@given(threads=st.lists(st.text(min_size=1, max_size=200), min_size=2, max_size=6, unique=True))
def test_a_hosts_thread_id_maps_to_a_plain_session_never_shared(threads: list[str]) -> None:
    sessions = [session_id_for(t) for t in threads]
    assert all(is_session_id(s) for s in sessions)
    assert len(set(sessions)) == len(threads)
    for thread, session in zip(threads, sessions, strict=True):
        if is_session_id(thread) and not re.search(r"\.[0-9a-f]{16}$", thread):
            assert session == thread  # a plain thread id is its own session


@given(
    threads=st.lists(
        st.one_of(
            st.text(min_size=1, max_size=120), st.from_regex(r"[a-z@._-]{1,30}", fullmatch=True)
        ),
        min_size=1,
        max_size=6,
        unique=True,
    )
)
def test_a_mapped_session_never_equals_an_id_someone_can_pass(threads: list[str]) -> None:
    """An attacker who learns the session a host id was mapped to passes that name as an id of
    its own: it maps to another session, never to the first one's."""
    for thread in threads:
        mapped = session_id_for(thread)
        if mapped != thread:
            assert session_id_for(mapped) != mapped
            assert session_id_for(mapped) != session_id_for(thread)


def test_a_name_shaped_like_a_mapped_one_is_mapped_too() -> None:
    victim = session_id_for("support-alice@example.com")
    assert victim == "support-alice_example_com.46b2a1c7079068a8"
    # The name the attacker chose: plain, and equal to the victim's folder.
    attacker = session_id_for("support-alice_example_com.46b2a1c7079068a8")
    assert is_session_id(attacker)
    assert attacker != victim
    assert attacker.startswith("support-alice_example_com_46b2a1c7079068a8.")
    # A plain name that only looks a little like one is kept.
    assert session_id_for("release-1.2.3") == "release-1.2.3"
    assert session_id_for("run.0123456789abcdeF") == "run.0123456789abcdeF"
