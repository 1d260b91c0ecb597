"""`WorkspaceStorage` as Strands' unified `strands.storage.Storage`, with the real package.

Byte round trips, overwrite, delete, list and search on each workspace; the key rules of
Strands' own backends (checked against Strands' `InMemoryStorage` operation by operation);
hostile keys; restarts; concurrent writers (tasks and real processes); and real Strands
components that consume the protocol: `SnapshotSessionManager` behind an `Agent`,
`FileMemoryStore`, `_NamespacedStorage`. Run by `.ci/run` in an environment with
`ctxoffload[strands]`.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

require_framework("strands", "strands")

from strands import Agent  # noqa: E402
from strands.session.snapshot_session_manager import SnapshotSessionManager  # noqa: E402
from strands.storage import InMemoryStorage, Storage  # noqa: E402
from strands.storage.storage import (  # noqa: E402
    _EPHEMERAL,
    StorageSearchResult,
    _NamespacedStorage,
    _normalize_key,
)
from strands.types.exceptions import StorageError  # noqa: E402
from strands.vended_memory_stores.file_memory_store import FileMemoryStore  # noqa: E402
from strands_scripted import ScriptedModelBase  # noqa: E402
from workspace_kinds import WORKSPACES, shared_server  # noqa: E402

from ctxoffload import InMemoryWorkspace, LocalWorkspace, ObjectStoreWorkspace  # noqa: E402
from ctxoffload.integrations.strands import WorkspaceStorage  # noqa: E402
from helpers import examples  # noqa: E402

NOT_UTF8 = b"\xff\xfe\x80\x00 not utf-8 \xc3\x28 \xed\xa0\x80"


@pytest.fixture(params=WORKSPACES, ids=lambda f: f.__name__)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> WorkspaceStorage:
    return WorkspaceStorage(request.param(tmp_path), session_id="run-1")


def megabytes(n: int, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(n << 20)


# -- the protocol --------------------------------------------------------------------------


def test_it_is_a_strands_storage(storage: WorkspaceStorage) -> None:
    assert isinstance(storage, Storage)


@pytest.mark.parametrize(
    "value",
    [b"", b"plain text\n", NOT_UTF8, bytes(range(256)) * 3],
    ids=["empty", "text", "not-utf8", "all-bytes"],
)
async def test_bytes_come_back_exactly(storage: WorkspaceStorage, value: bytes) -> None:
    await storage.write("blobs/one.bin", value)
    got = await storage.read("blobs/one.bin")
    assert got == value and type(got) is bytes


async def test_a_multi_megabyte_value_comes_back_exactly(storage: WorkspaceStorage) -> None:
    value = megabytes(6)
    await storage.write("big/value", value)
    assert await storage.read("big/value") == value


async def test_a_missing_key_reads_as_none(storage: WorkspaceStorage) -> None:
    assert await storage.read("never/written") is None
    await storage.write("written", b"x")
    assert await storage.read("written/below") is None
    assert await storage.read("writte") is None


async def test_a_write_replaces_the_value(storage: WorkspaceStorage) -> None:
    await storage.write("state.json", b'{"v": 1}')
    await storage.write("state.json", b'{"v": 2, "longer": true}')
    await storage.write("state.json", b"3")
    assert await storage.read("state.json") == b"3"
    assert await storage.list("") == ["state.json"]


async def test_delete_removes_the_key_and_a_missing_key_is_no_error(
    storage: WorkspaceStorage,
) -> None:
    await storage.write("a/1", b"one")
    await storage.write("a/2", b"two")
    await storage.delete("a/1")
    await storage.delete("a/1")
    await storage.delete("no/such/key")
    assert await storage.read("a/1") is None
    assert await storage.read("a/2") == b"two"
    assert await storage.list("") == ["a/2"]
    await storage.write("a/1", b"back")
    assert await storage.read("a/1") == b"back"


async def test_list_is_a_sorted_prefix_match_on_full_keys(storage: WorkspaceStorage) -> None:
    keys = ["a/b/1", "a/b/2", "a/c", "ab", "b", "a/b", "z/\u00e9t\u00e9.md"]
    for key in keys:
        await storage.write(key, key.encode())
    assert await storage.list("") == sorted(keys)
    assert await storage.list("a/") == ["a/b", "a/b/1", "a/b/2", "a/c"]
    assert await storage.list("a") == ["a/b", "a/b/1", "a/b/2", "a/c", "ab"]
    assert await storage.list("a/b/") == ["a/b/1", "a/b/2"]
    assert await storage.list("//a//b/") == ["a/b/1", "a/b/2"]  # Strands' prefix rules
    assert await storage.list("z/\u00e9") == ["z/\u00e9t\u00e9.md"]
    assert await storage.list("zz") == []


async def test_search_ranks_keys_by_the_words_they_and_their_values_share(
    storage: WorkspaceStorage,
) -> None:
    await storage.write("logs/export.txt", b"ERROR export-worker-3 disk quota exceeded")
    await storage.write("logs/import.txt", b"INFO import finished, disk fine")
    await storage.write("notes/quota.md", b"raise the quota before friday")
    await storage.write("binary.bin", NOT_UTF8)
    results = await storage.search("disk quota exceeded")
    assert all(isinstance(r, StorageSearchResult) for r in results)
    assert (results[0].key, results[0].score) == ("logs/export.txt", 3)
    assert {r.key for r in results} == {"logs/export.txt", "logs/import.txt", "notes/quota.md"}
    assert results[0].data == b"ERROR export-worker-3 disk quota exceeded"
    assert await storage.search("the of") == []  # stop words only


async def test_two_session_ids_on_one_workspace_see_different_keys(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    first = WorkspaceStorage(ws, session_id="a")
    second = WorkspaceStorage(ws, session_id="a.storage.x")  # shaped to share a name prefix
    await first.write("k", b"first")
    await second.write("k", b"second")
    assert await first.read("k") == b"first" and await second.read("k") == b"second"
    assert await first.list("") == ["k"] and await second.list("") == ["k"]
    await first.delete("k")
    assert await second.read("k") == b"second"


async def test_legacy_store_and_unified_keys_live_side_by_side(storage: WorkspaceStorage) -> None:
    reference = await storage.store("tooluse_1", b"tool output", "text/plain")
    await storage.write("tooluse_1", b"unified value")
    content, content_type = await storage.retrieve(reference)
    assert content == b"tool output" and content_type.startswith("text/plain")
    assert await storage.read("tooluse_1") == b"unified value"
    assert await storage.list("") == ["tooluse_1"]


# -- keys ----------------------------------------------------------------------------------

REFUSED = ["", "/", "///", "../x", "a/../b", "..", "a/..", "a\\b", "\\", "x/../../etc/passwd"]


@pytest.mark.parametrize("key", REFUSED)
async def test_keys_strands_refuses_are_storage_errors_naming_the_key(
    storage: WorkspaceStorage, key: str
) -> None:
    with pytest.raises(StorageError):
        _normalize_key(key)  # Strands' own backends refuse it too
    for call in (storage.write(key, b"x"), storage.read(key), storage.delete(key)):
        with pytest.raises(StorageError, match="key"):
            await call
    assert await storage.list("") == []


@pytest.mark.parametrize("prefix", ["..", "a/../b", "a\\b"])
async def test_prefixes_strands_refuses_are_storage_errors(
    storage: WorkspaceStorage, prefix: str
) -> None:
    with pytest.raises(StorageError, match="prefix"):
        await storage.list(prefix)


async def test_keys_are_normalised_as_strands_does(storage: WorkspaceStorage) -> None:
    await storage.write("//a//b/", b"v")
    assert await storage.read("a/b") == b"v"
    assert await storage.read("/a/b") == b"v"
    assert await storage.list("") == ["a/b"]
    await storage.delete("a///b")
    assert await storage.read("a/b") is None


HOSTILE = [
    "/etc/passwd",
    "/.../..../x",  # dots, but no '..' segment
    "a\x00b",
    "\x00",
    "x" * 10_000,
    "/".join(["deep"] * 300),
    "\udcff\udcfe surrogate-escaped bytes",
    "\u2215etc\u2215passwd",  # division slash, not '/'
    "..\u2024/x",
    "./x",
    "a/./b",
    ".",
    "~/.ssh/id_rsa",
    "%2e%2e/%2e%2e/x",
    "line\nbreak\r\ttab",
    "C:evil",
    "sessions/run-1/state.json",
    "data/" + "0" * 64 + ".bin",
    "CON",
    "\u202eRTL",
]


async def test_hostile_keys_never_reach_outside_the_workspace(
    tmp_path: Path, tree: Callable[[Path], dict[str, bytes | None]]
) -> None:
    parent = tmp_path / "parent"
    (parent / "neighbour").mkdir(parents=True)
    (parent / "neighbour" / "keep.txt").write_text("untouched")
    before = tree(parent)
    storage = WorkspaceStorage(LocalWorkspace(parent / "ws", fsync=False), session_id="run-1")
    for i, key in enumerate(HOSTILE):
        await storage.write(key, f"value {i}".encode())
    for i, key in enumerate(HOSTILE):
        assert await storage.read(key) == f"value {i}".encode(), key
    assert await storage.list("") == sorted(_normalize_key(k) for k in HOSTILE)
    after = tree(parent)
    assert {k: v for k, v in after.items() if not k.startswith("ws")} == before
    for path in after.keys() - before.keys():
        parts = Path(path).parts
        assert parts[0] == "ws"
        assert len(parts) <= 4 and (len(parts) < 3 or parts[1] in ("sessions", "data"))
    for key in HOSTILE:
        await storage.delete(key)
    assert await storage.list("") == []


def test_a_workspace_of_hostile_keys_passes_ctxoffload_verify(tmp_path: Path) -> None:
    storage = WorkspaceStorage(LocalWorkspace(tmp_path / "ws", fsync=False), session_id="run-1")
    for i, key in enumerate(HOSTILE):
        storage.sync.write(key, f"value {i}".encode())
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "--workdir", str(tmp_path / "ws"), "verify", "--json"],
        capture_output=True,
        text=True,
    )
    report = json.loads(done.stdout)
    assert report["ok"], report["problems"]
    assert report["checked"]["references"] >= len(HOSTILE)


ANY_KEY = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=60),
    st.lists(st.sampled_from(["a", "..", ".", "", "/", "\\", "\x00", "\udcff", "b.json"])).map(
        "/".join
    ),
)


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(key=ANY_KEY, value=st.binary(max_size=64))
def test_any_key_is_refused_as_strands_refuses_it_or_round_trips_inside(
    tmp_path: Path, key: str, value: bytes
) -> None:
    workdir = tmp_path / "ws"
    storage = WorkspaceStorage(LocalWorkspace(workdir, fsync=False), session_id="prop")
    try:
        normalized = _normalize_key(key)
    except StorageError:
        with pytest.raises(StorageError):
            storage.sync.write(key, value)
        return
    storage.sync.write(key, value)
    assert storage.sync.read(key) == value
    assert storage.sync.read(normalized) == value
    assert normalized in storage.sync.list(normalized)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]
    for dirpath, _, _ in os.walk(workdir):
        assert Path(dirpath).resolve().is_relative_to(workdir.resolve())


# -- the same answers as Strands' InMemoryStorage --------------------------------------------

SEGMENT = st.sampled_from(["a", "b", "ab", "a.json", ".", "..", "", "x y"])
KEY = st.tuples(
    st.sampled_from(["", "/", "//"]),
    st.lists(SEGMENT, max_size=4),
    st.sampled_from(["", "/", "\\"]),
).map(lambda t: t[0] + "/".join(t[1]) + t[2])
OPERATION = st.one_of(
    st.tuples(st.just("write"), KEY, st.binary(max_size=8)),
    st.tuples(st.just("read"), KEY),
    st.tuples(st.just("delete"), KEY),
    st.tuples(st.just("list"), KEY),
)


async def _outcome(storage: Any, operation: tuple[Any, ...]) -> Any:
    name, key, *rest = operation
    try:
        return await getattr(storage, name)(key, *rest)
    except StorageError:
        return "StorageError"


@settings(max_examples=examples(200), deadline=None)
@given(operations=st.lists(OPERATION, max_size=25))
def test_every_operation_answers_as_strands_in_memory_storage(
    operations: list[tuple[Any, ...]],
) -> None:
    async def run() -> None:
        ours = WorkspaceStorage(InMemoryWorkspace(), session_id="diff")
        theirs = InMemoryStorage()
        for operation in operations:
            assert await _outcome(ours, operation) == await _outcome(theirs, operation), operation

    asyncio.run(run())


@settings(max_examples=examples(25), deadline=None)
@given(operations=st.lists(OPERATION, max_size=15))
def test_on_disk_every_operation_answers_as_strands_in_memory_storage(
    operations: list[tuple[Any, ...]],
) -> None:
    async def run(workdir: str) -> None:
        ours = WorkspaceStorage(LocalWorkspace(workdir, fsync=False), session_id="diff")
        theirs = InMemoryStorage()
        for operation in operations:
            assert await _outcome(ours, operation) == await _outcome(theirs, operation), operation

    with tempfile.TemporaryDirectory() as workdir:
        asyncio.run(run(workdir))


# -- persistence ---------------------------------------------------------------------------


async def test_a_new_storage_on_the_same_directory_reads_what_the_old_one_wrote(
    tmp_path: Path,
) -> None:
    big = megabytes(3)
    old = WorkspaceStorage(LocalWorkspace(tmp_path / "ws"), session_id="run-1")
    await old.write("session/s1/snapshot_latest.json", b'{"messages": []}')
    await old.write("blobs/big", big)
    await old.write("gone", b"deleted before the restart")
    await old.delete("gone")
    del old
    new = WorkspaceStorage(LocalWorkspace(tmp_path / "ws"), session_id="run-1")
    assert await new.list("") == ["blobs/big", "session/s1/snapshot_latest.json"]
    assert await new.read("blobs/big") == big
    assert await new.read("session/s1/snapshot_latest.json") == b'{"messages": []}'
    assert await new.read("gone") is None


def test_a_restarted_process_reads_what_another_process_wrote(
    tmp_path: Path, spawn_python: Any
) -> None:
    writer = spawn_python(
        """
        import sys
        from ctxoffload import LocalWorkspace
        from ctxoffload.integrations.strands import WorkspaceStorage

        storage = WorkspaceStorage(LocalWorkspace(sys.argv[1]), session_id="run-1")
        storage.sync.write("k/one", bytes(range(256)))
        storage.sync.write("k/two", b"two")
        """,
        str(tmp_path / "ws"),
    )
    _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    storage = WorkspaceStorage(LocalWorkspace(tmp_path / "ws"), session_id="run-1")
    assert storage.sync.list("k/") == ["k/one", "k/two"]
    assert storage.sync.read("k/one") == bytes(range(256))


async def test_a_new_storage_on_the_same_bucket_reads_what_the_old_one_wrote() -> None:
    s3 = shared_server()
    url = f"s3://{s3.new_bucket()}/agents"
    old = WorkspaceStorage(ObjectStoreWorkspace(url, **s3.workspace_kwargs()), "run-1")
    await old.write("a/b", NOT_UTF8)
    new = WorkspaceStorage(ObjectStoreWorkspace(url, **s3.workspace_kwargs()), "run-1")
    assert await new.list("") == ["a/b"]
    assert await new.read("a/b") == NOT_UTF8


async def test_a_moved_workspace_directory_still_reads_its_values(tmp_path: Path) -> None:
    old = WorkspaceStorage(LocalWorkspace(tmp_path / "ws", fsync=False), session_id="run-1")
    await old.write("k", b"value")
    (tmp_path / "ws").rename(tmp_path / "moved")
    new = WorkspaceStorage(LocalWorkspace(tmp_path / "moved", fsync=False), session_id="run-1")
    assert await new.read("k") == b"value"


# -- failures ------------------------------------------------------------------------------


async def test_a_refused_write_is_a_storage_error_and_the_old_value_stays(tmp_path: Path) -> None:
    storage = WorkspaceStorage(LocalWorkspace(tmp_path / "ws", fsync=False), session_id="run-1")
    await storage.write("k", b"old")
    # As root, chmod cannot refuse a write: data/ is moved aside and replaced by a file.
    (tmp_path / "ws" / "data").rename(tmp_path / "ws" / "data-aside")
    (tmp_path / "ws" / "data").write_bytes(b"not a folder")
    with pytest.raises(StorageError, match="'k'"):
        await storage.write("k", b"new")
    (tmp_path / "ws" / "data").unlink()
    (tmp_path / "ws" / "data-aside").rename(tmp_path / "ws" / "data")
    assert await storage.read("k") == b"old"


async def test_a_value_whose_bytes_are_gone_is_a_storage_error_and_search_skips_it(
    tmp_path: Path,
) -> None:
    storage = WorkspaceStorage(LocalWorkspace(tmp_path / "ws", fsync=False), session_id="run-1")
    await storage.write("lost", b"quota words")
    await storage.write("kept", b"quota words too")
    for path in (tmp_path / "ws" / "data").iterdir():
        if path.read_bytes() == b"quota words":
            path.unlink()
    with pytest.raises(StorageError, match="'lost'"):
        await storage.read("lost")
    assert [r.key for r in await storage.search("quota")] == ["kept"]


async def test_a_value_evicted_from_memory_is_a_storage_error() -> None:
    ws = InMemoryWorkspace(evict_after_turns=1)
    storage = WorkspaceStorage(ws, session_id="run-1")
    await storage.write("k", b"v")
    ws.note_model_call()
    ws.note_model_call()
    with pytest.raises(StorageError, match="evict"):
        await storage.read("k")


async def test_a_planted_link_in_place_of_a_key_is_refused_and_followed_nowhere(
    tmp_path: Path, tree: Callable[[Path], dict[str, bytes | None]]
) -> None:
    storage = WorkspaceStorage(LocalWorkspace(tmp_path / "ws", fsync=False), session_id="run-1")
    await storage.write("k", b"value")
    (entry,) = (tmp_path / "ws" / "sessions").iterdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "state.json").write_bytes(b"{}")
    before = tree(outside)
    for child in entry.iterdir():
        child.unlink()
    entry.rmdir()
    entry.symlink_to(outside, target_is_directory=True)
    with pytest.raises(StorageError, match="'k'"):
        await storage.write("k", b"through the link")
    with pytest.raises(StorageError, match="'k'"):
        await storage.read("k")
    assert tree(outside) == before


async def test_gc_keeps_every_value_and_frees_the_bytes_of_replaced_and_deleted_ones(
    tmp_path: Path,
) -> None:
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    storage = WorkspaceStorage(ws, session_id="run-1")
    await storage.write("kept", b"kept value")
    await storage.write("replaced", b"first value")
    await storage.write("replaced", b"second value")
    await storage.write("deleted", b"deleted value")
    await storage.delete("deleted")
    an_hour_and_more = os.stat(tmp_path / "ws" / "data").st_mtime - 2 * 3600
    for path in (tmp_path / "ws" / "data").iterdir():
        os.utime(path, (an_hour_and_more, an_hour_and_more))  # past gc's grace period
    report = await ws.gc()
    assert len(report.data_removed) == 2 and not report.sessions_removed
    left = {p.read_bytes() for p in (tmp_path / "ws" / "data").iterdir()}
    assert left == {b"kept value", b"second value"}
    assert await storage.read("kept") == b"kept value"
    assert await storage.read("replaced") == b"second value"
    assert await storage.list("") == ["kept", "replaced"]


async def test_gc_older_than_removes_the_keys_not_written_for_that_long(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws", fsync=False)
    storage = WorkspaceStorage(ws, session_id="run-1")
    await storage.write("old", b"old value")
    (entry,) = (tmp_path / "ws" / "sessions").iterdir()
    await storage.write("new", b"new value")
    two_hours_ago = os.stat(entry).st_mtime - 2 * 3600
    for path in (entry / "state.json", entry):
        os.utime(path, (two_hours_ago, two_hours_ago))
    report = await ws.gc(older_than=3600)
    assert report.sessions_removed == [entry.name]
    assert await storage.list("") == ["new"]


# -- concurrency ---------------------------------------------------------------------------


async def test_concurrent_writers_to_different_keys_lose_nothing(
    storage: WorkspaceStorage,
) -> None:
    values = {f"k/{i:03d}": f"value {i}".encode() * (i + 1) for i in range(120)}
    await asyncio.gather(*(storage.write(k, v) for k, v in values.items()))
    assert await storage.list("k/") == sorted(values)
    got = await asyncio.gather(*(storage.read(k) for k in values))
    assert dict(zip(values, got, strict=True)) == values


async def test_concurrent_writers_to_one_key_leave_one_whole_value(
    storage: WorkspaceStorage,
) -> None:
    values = [bytes([i]) * (4096 * (i + 1)) for i in range(40)]
    seen: list[bytes | None] = []

    async def reader() -> None:
        for _ in range(30):
            seen.append(await storage.read("shared"))
            await asyncio.sleep(0)

    await asyncio.gather(*(storage.write("shared", v) for v in values), reader(), reader())
    final = await storage.read("shared")
    assert final in values
    assert all(s is None or s in values for s in seen)
    assert await storage.list("") == ["shared"]


async def test_concurrent_writes_and_deletes_of_one_key_end_whole_or_absent(
    storage: WorkspaceStorage,
) -> None:
    values = [f"v{i}".encode() * 1000 for i in range(20)]
    calls = [storage.write("k", v) for v in values] + [storage.delete("k") for _ in range(20)]
    random.Random(3).shuffle(calls)
    await asyncio.gather(*calls)
    final = await storage.read("k")
    assert final is None or final in values
    assert await storage.list("") == ([] if final is None else ["k"])


async def test_listing_while_keys_come_and_go_sees_only_real_keys(
    storage: WorkspaceStorage,
) -> None:
    keys = [f"churn/{i}" for i in range(12)]
    listings: list[list[str]] = []

    async def churn(key: str) -> None:
        for round in range(4):
            await storage.write(key, f"{key}:{round}".encode())
            await storage.delete(key)
        await storage.write(key, b"last")

    async def lister() -> None:
        for _ in range(8):
            listings.append(await storage.list("churn/"))

    await asyncio.gather(*(churn(k) for k in keys), lister(), lister())
    assert all(set(listing) <= set(keys) and listing == sorted(listing) for listing in listings)
    assert await storage.list("churn/") == sorted(keys)


def test_processes_writing_one_key_and_their_own_keys_leave_whole_values(
    tmp_path: Path, spawn_python: Any
) -> None:
    code = """
        import sys
        from ctxoffload import LocalWorkspace
        from ctxoffload.integrations.strands import WorkspaceStorage

        me = int(sys.argv[2])
        storage = WorkspaceStorage(LocalWorkspace(sys.argv[1]), session_id="run-1")
        for round in range(15):
            storage.sync.write("shared", bytes([me]) * (50_000 + round))
            storage.sync.write(f"own/{me}/{round}", f"{me}:{round}".encode())
        """
    children = [spawn_python(code, str(tmp_path / "ws"), str(n)) for n in range(8)]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    storage = WorkspaceStorage(LocalWorkspace(tmp_path / "ws"), session_id="run-1")
    final = storage.sync.read("shared")
    assert final is not None
    assert final in {bytes([me]) * (50_000 + r) for me in range(8) for r in range(15)}
    own = storage.sync.list("own/")
    assert own == sorted(f"own/{me}/{r}" for me in range(8) for r in range(15))
    assert storage.sync.read("own/5/14") == b"5:14"


# -- the synchronous facade ------------------------------------------------------------------


def test_the_sync_facade_works_without_an_event_loop(storage: WorkspaceStorage) -> None:
    storage.sync.write("k", NOT_UTF8)
    assert storage.sync.read("k") == NOT_UTF8
    assert storage.sync.list("") == ["k"]
    assert [r.key for r in storage.sync.search("utf")] == ["k"]
    storage.sync.delete("k")
    assert storage.sync.read("k") is None


async def test_the_sync_facade_refuses_to_block_a_running_loop(
    storage: WorkspaceStorage,
) -> None:
    with pytest.raises(RuntimeError, match=r"await storage\.write"):
        storage.sync.write("k", b"v")
    with pytest.raises(RuntimeError, match=r"await storage\.read"):
        storage.sync.read("k")
    assert await storage.read("k") is None  # nothing was written


async def test_the_sync_facade_works_from_a_worker_thread_of_a_running_loop(
    storage: WorkspaceStorage,
) -> None:
    await asyncio.to_thread(storage.sync.write, "k", b"from a thread")
    assert await storage.read("k") == b"from a thread"
    assert await asyncio.to_thread(storage.sync.read, "k") == b"from a thread"


# -- real Strands components ---------------------------------------------------------------


class EchoModel(ScriptedModelBase):
    """Answers every prompt with `heard: <prompt>`."""

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        prompt = messages[-1]["content"][0]["text"]
        for event in [
            {"messageStart": {"role": "assistant"}},
            {"contentBlockDelta": {"delta": {"text": f"heard: {prompt}"}}},
            {"contentBlockStop": {}},
            {"messageStop": {"stopReason": "end_turn"}},
        ]:
            yield event


def _texts(agent: Agent) -> list[str]:
    return [m["content"][0]["text"] for m in agent.messages]


def test_a_snapshot_session_in_a_workspace_survives_a_restart(tmp_path: Path) -> None:
    def start() -> tuple[Agent, SnapshotSessionManager, WorkspaceStorage]:
        storage = WorkspaceStorage(LocalWorkspace(tmp_path / "ws"), session_id="app")
        manager = SnapshotSessionManager(
            "chat-1", storage=storage, snapshot_trigger=lambda **kwargs: True
        )
        agent = Agent(model=EchoModel(), session_manager=manager, callback_handler=None)
        return agent, manager, storage

    agent, _, _ = start()
    agent("first question")
    agent("second question")
    expected = ["first question", "heard: first question", "second question"]
    expected.append("heard: second question")
    assert _texts(agent) == expected
    del agent

    again, manager, storage = start()
    assert _texts(again) == expected  # restored from the workspace at init
    keys = storage.sync.list("session/chat-1/")
    assert "session/chat-1/scopes/agent/default/snapshots/snapshot_latest.json" in keys
    history = asyncio.run(manager.list_snapshot_ids(again))
    assert len(history) == 2
    assert asyncio.run(manager.restore_snapshot(again, snapshot_id=history[0]))
    assert _texts(again) == expected[:2]  # time travel to after the first turn

    asyncio.run(manager.delete_session())
    assert storage.sync.list("session/chat-1/") == []
    fresh, _, _ = start()
    assert fresh.messages == []


def test_an_agent_level_workspace_storage_backs_the_session_manager(tmp_path: Path) -> None:
    storage = WorkspaceStorage(InMemoryWorkspace(), session_id="app")
    agent = Agent(
        model=EchoModel(),
        storage=storage,
        session_manager=SnapshotSessionManager("chat-2"),
        callback_handler=None,
    )
    agent("hello")
    assert storage.sync.list("") == [
        "session/chat-2/scopes/agent/default/snapshots/snapshot_latest.json"
    ]
    again = Agent(
        model=EchoModel(),
        storage=storage,
        session_manager=SnapshotSessionManager("chat-2"),
        callback_handler=None,
    )
    assert _texts(again) == ["hello", "heard: hello"]


async def test_a_file_memory_store_adds_and_searches_through_a_workspace(
    storage: WorkspaceStorage,
) -> None:
    store = FileMemoryStore(name="notes", storage=storage)
    key = await store.add("# Export job\nThe nightly export fails on disk quota.")
    await store.add("# Lunch\nTacos on friday.")
    found = await store.search("why does the export fail")
    assert found and "disk quota" in found[0].content
    assert await storage.list("memory/notes/") == sorted(
        [f"memory/notes/{key}", "memory/notes/lunch.md"]
    )


async def test_a_namespaced_view_scopes_every_operation(storage: WorkspaceStorage) -> None:
    view = _NamespacedStorage(storage, "tenant-a")
    await view.write("doc.txt", b"alpha beta")
    await storage.write("tenant-b/doc.txt", b"alpha gamma")
    assert await view.read("doc.txt") == b"alpha beta"
    assert await view.list("") == ["doc.txt"]
    assert [r.key for r in await view.search("alpha")] == ["doc.txt"]
    assert await storage.list("") == ["tenant-a/doc.txt", "tenant-b/doc.txt"]
    await view.delete("doc.txt")
    assert await storage.list("") == ["tenant-b/doc.txt"]


def test_strands_sees_a_memory_workspace_as_ephemeral_and_others_as_durable(
    tmp_path: Path,
) -> None:
    in_memory = WorkspaceStorage(InMemoryWorkspace())
    on_disk = WorkspaceStorage(LocalWorkspace(tmp_path / "ws"))
    assert getattr(in_memory, "_ephemeral", None) is _EPHEMERAL
    assert getattr(_NamespacedStorage(in_memory, "x"), "_ephemeral", None) is _EPHEMERAL
    assert getattr(on_disk, "_ephemeral", None) is None
