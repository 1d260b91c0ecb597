"""`WorkspaceBackend` method by method against deepagents' own result types, on a local, an
in-memory and a bucket workspace (moto's S3 on 127.0.0.1): each BackendProtocol method and
its async twin, hostile paths answered with deepagents' error values, versions never
overwritten, the session from the run's thread_id."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from frameworks import require_framework
from workspace_kinds import bucket, local, memory

from ctxoffload.workspace import Workspace

require_framework("deepagents", "deepagents")

from deepagents.backends import CompositeBackend, StateBackend  # noqa: E402
from deepagents.backends.protocol import (  # noqa: E402
    BackendProtocol,
    EditResult,
    FileDownloadResponse,
    GlobResult,
    GrepResult,
    LsResult,
    WriteResult,
)
from langchain_core.runnables import RunnableLambda  # noqa: E402

from ctxoffload.integrations.deepagents import WorkspaceBackend  # noqa: E402

TEXT = "first line\nsecond needle\nthird line\n"
HOSTILE = [
    "../escape",
    "/../escape",
    "/a/../../escape",
    "/./call",
    "relative",
    "/nul\x00byte",
    "/back\\slash",
    "/" + "x" * 2000,
]


@pytest.fixture(params=[local, memory, bucket], ids=["local", "memory", "bucket"])
def workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Workspace:
    make: Callable[[Path], Workspace] = request.param
    return make(tmp_path)


@pytest.fixture
def backend(workspace: Workspace) -> WorkspaceBackend:
    return WorkspaceBackend(workspace, "/large_tool_results/", session_id="fallback")


def test_it_is_a_deepagents_backend(backend: WorkspaceBackend) -> None:
    assert isinstance(backend, BackendProtocol)
    routes = WorkspaceBackend.routes(backend.workspace, session_id="s")
    assert sorted(routes) == ["/conversation_history/", "/large_tool_results/"]
    assert all(b.route == route for route, b in routes.items())


def test_write_stores_a_tool_result_file_of_the_session(
    backend: WorkspaceBackend, workspace: Workspace
) -> None:
    assert backend.write("/call_1", TEXT) == WriteResult(path="/call_1")
    files = asyncio.run(workspace.list_files("fallback"))
    assert [f.rsplit("/", 1)[-1] for f in files] == ["tool_result-call_1.txt"]
    assert asyncio.run(workspace.read_reference(files[0])).decode() == TEXT
    events = asyncio.run(workspace.read_events("fallback"))
    events = [e for e in events if e["kind"] == "tool_result"]
    assert [(e["tool_id"], e["tool_name"]) for e in events] == [
        ("call_1", "deepagents/large_tool_results/")
    ]


def test_read_returns_raw_lines_by_window(backend: WorkspaceBackend) -> None:
    backend.write("/call_1", TEXT)
    whole = backend.read("/call_1")
    assert whole.error is None
    assert whole.file_data == {"content": TEXT, "encoding": "utf-8"}
    assert (whole.total_lines, whole.start_line, whole.end_line) == (3, 1, 3)
    window = backend.read("/call_1", offset=1, limit=1)
    assert window.file_data["content"] == "second needle\n"
    assert (window.start_line, window.end_line, window.next_offset) == (2, 2, 2)
    assert backend.read("/call_1", offset=9).error
    assert backend.read("/missing").error == "Error: File '/missing' not found"


def test_ls_lists_files_and_folders(backend: WorkspaceBackend) -> None:
    assert backend.ls("/") == LsResult(entries=[])
    backend.write("/call_1", TEXT)
    backend.upload_files([("/media/a.png", b"\x89PNG\xff\x00")])
    root = backend.ls("/").entries
    assert [(e["path"], e["is_dir"]) for e in root] == [("/call_1", False), ("/media/", True)]
    assert root[0]["size"] == len(TEXT)
    media = backend.ls("/media").entries
    assert [(e["path"], e["size"]) for e in media] == [("/media/a.png", 6)]


def test_grep_is_literal_and_keeps_deepagents_shape(backend: WorkspaceBackend) -> None:
    backend.write("/call_1", TEXT)
    backend.write("/call_2", "a.b\naxb\n")
    found = backend.grep("needle")
    assert found == GrepResult(matches=[{"path": "/call_1", "line": 2, "text": "second needle"}])
    assert [m["text"] for m in backend.grep("a.b").matches] == ["a.b"]  # not a regex
    assert backend.grep("line", glob="call_2").matches == []
    assert backend.grep("line", max_count=1).truncated
    assert len(backend.grep("needle", "/call_1").matches) == 1
    assert backend.grep("needle", "/call_2").matches == []


def test_glob_matches_paths(backend: WorkspaceBackend) -> None:
    backend.write("/call_1", TEXT)
    backend.write("/notes/x.md", "x")
    assert [m["path"] for m in backend.glob("*.md").matches] == ["/notes/x.md"]
    assert sorted(m["path"] for m in backend.glob("*").matches) == ["/call_1", "/notes/x.md"]
    assert [m["path"] for m in backend.glob("*", "/notes").matches] == ["/notes/x.md"]
    assert backend.glob("call_*").matches[0]["size"] == len(TEXT)


def test_edit_stores_a_new_version_and_keeps_the_old(
    backend: WorkspaceBackend, workspace: Workspace
) -> None:
    backend.write("/call_1", TEXT)
    assert backend.edit("/call_1", "needle", "pin") == EditResult(path="/call_1", occurrences=1)
    assert backend.read("/call_1").file_data["content"] == TEXT.replace("needle", "pin")
    assert "not found" in backend.edit("/call_1", "absent", "x").error
    assert "appears 2 times" in backend.edit("/call_1", "line", "x").error
    assert backend.edit("/call_1", "line", "row", replace_all=True).occurrences == 2
    assert backend.edit("/missing", "a", "b").error == "Error: File '/missing' not found"
    files = sorted(asyncio.run(workspace.list_files("fallback")))
    contents = [asyncio.run(workspace.read_reference(f)).decode() for f in files]
    assert TEXT in contents and len(contents) == 3  # every version kept


def test_text_that_extends_the_file_stores_only_what_it_adds(
    backend: WorkspaceBackend, workspace: Workspace
) -> None:
    backend.write("/h.md", "# one\n")
    backend.edit("/h.md", "# one\n", "# one\n# two\n")  # how deepagents appends history
    backend.upload_files([("/h.md", b"# one\n# two\n# three\n")])
    backend.write("/h.md", "# one\n# two\n# three\n")  # the same text: nothing stored
    files = sorted(asyncio.run(workspace.list_files("fallback")))
    parts = [asyncio.run(workspace.read_reference(f)).decode() for f in files]
    assert sorted(parts) == ["# one\n", "# three\n", "# two\n"]
    assert backend.read("/h.md").file_data["content"] == "# one\n# two\n# three\n"
    assert backend.ls("/").entries[0]["size"] == len("# one\n# two\n# three\n")
    assert backend.grep("three").matches == [{"path": "/h.md", "line": 3, "text": "# three"}]
    backend.write("/h.md", "# new\n")  # not an extension: a whole version
    assert backend.download_files(["/h.md"])[0].content == b"# new\n"
    backend.write("/h.md", "# new\n# more\n")
    assert backend.read("/h.md").file_data["content"] == "# new\n# more\n"


def test_a_rewrite_to_an_earlier_content_reads_as_that_content(backend: WorkspaceBackend) -> None:
    for text in ("A", "B", "A"):
        backend.write("/f", text)
    assert backend.read("/f").file_data["content"] == "A"


def test_delete_is_refused_and_keeps_the_file(backend: WorkspaceBackend) -> None:
    backend.write("/call_1", TEXT)
    assert "never deletes" in backend.delete("/call_1").error
    assert backend.read("/call_1").file_data["content"] == TEXT


def test_upload_and_download_round_trip_text_and_bytes(
    backend: WorkspaceBackend, workspace: Workspace
) -> None:
    binary = bytes(range(256))
    answers = backend.upload_files([("/t.md", b"# notes\n"), ("/img/b.bin", binary)])
    assert [a.error for a in answers] == [None, None]
    got = backend.download_files(["/t.md", "/img/b.bin", "/absent"])
    assert got == [
        FileDownloadResponse(path="/t.md", content=b"# notes\n"),
        FileDownloadResponse(path="/img/b.bin", content=binary),
        FileDownloadResponse(path="/absent", error="file_not_found"),
    ]
    assert backend.read("/img/b.bin").file_data["encoding"] == "base64"
    assert "binary" in backend.edit("/img/b.bin", "a", "b").error
    data = [e for e in asyncio.run(workspace.read_events("fallback")) if e["kind"] == "data"]
    assert [e["key"] for e in data] == ["deepagents/large_tool_results/img/b.bin"]


@pytest.mark.parametrize("path", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_paths_get_deepagents_error_values(
    backend: WorkspaceBackend, workspace: Workspace, path: str
) -> None:
    assert backend.write(path, "x").error
    assert backend.read(path).error
    assert backend.edit(path, "x", "y").error
    assert backend.ls(path).error
    assert backend.glob("*", path).error
    assert backend.grep("x", path).error
    assert backend.delete(path).error
    assert backend.upload_files([(path, b"x")])[0].error == "invalid_path"
    assert backend.download_files([path])[0].error == "invalid_path"
    assert asyncio.run(workspace.list_sessions()) == []


@pytest.mark.parametrize(
    "path", ["/" + "a" * 1000, "/naïve name (2).md", "/deep/er/and/deeper/file.txt"]
)
def test_long_and_unusual_names_round_trip(
    backend: WorkspaceBackend, workspace: Workspace, path: str
) -> None:
    assert backend.write(path, "text") == WriteResult(path=path)
    assert backend.read(path).file_data["content"] == "text"
    assert [m["path"] for m in backend.glob("**").matches] == [path]
    (stored,) = asyncio.run(workspace.list_files("fallback"))
    assert len(Path(stored).name) < 120  # a long or unusual name is hashed, never trusted


def test_an_empty_path_names_no_file_but_the_root_folder(backend: WorkspaceBackend) -> None:
    backend.write("/call_1", TEXT)
    assert backend.write("", "x").error and backend.read("").error
    assert backend.download_files([""])[0].error == "invalid_path"
    assert [e["path"] for e in backend.ls("").entries] == ["/call_1"]
    assert len(backend.glob("*", "").matches) == len(backend.grep("needle", "").matches) == 1


def test_routes_do_not_see_each_other(workspace: Workspace) -> None:
    routes = WorkspaceBackend.routes(workspace)
    routes["/large_tool_results/"].write("/call_1", "result")
    routes["/conversation_history/"].write("/session_1.md", "history")
    assert [e["path"] for e in routes["/conversation_history/"].ls("/").entries] == [
        "/session_1.md"
    ]
    assert routes["/large_tool_results/"].grep("history").matches == []


def test_async_twins_answer_the_same(backend: WorkspaceBackend) -> None:
    async def run() -> None:
        assert await backend.awrite("/call_1", TEXT) == WriteResult(path="/call_1")
        assert (await backend.aread("/call_1")).file_data["content"] == TEXT
        assert (await backend.aedit("/call_1", "third", "3rd")).occurrences == 1
        assert [e["path"] for e in (await backend.als("/")).entries] == ["/call_1"]
        assert (await backend.agrep("3rd")).matches[0]["line"] == 3
        assert isinstance(await backend.aglob("*"), GlobResult)
        assert (await backend.adelete("/call_1")).error
        assert (await backend.aupload_files([("/u", b"u")]))[0].error is None
        assert (await backend.adownload_files(["/u"]))[0].content == b"u"
        # The sync methods work from inside a running loop too (on a worker thread).
        assert backend.read("/u").file_data["content"] == "u"

    asyncio.run(run())


def test_the_session_is_the_runs_thread_id(workspace: Workspace) -> None:
    backend = WorkspaceBackend(workspace, session_id="fallback")
    write = RunnableLambda(lambda _: backend.write("/call_1", "in a run"))
    write.invoke(None, {"configurable": {"thread_id": "thread-7"}})
    write.invoke(None, {"configurable": {"thread_id": "a thread/with spaces"}})
    write.invoke(None, {"configurable": {"thread_id": "--dashes first"}})
    backend.write("/call_2", "outside a run")
    sessions = asyncio.run(workspace.list_sessions())
    assert "thread-7" in sessions and "fallback" in sessions
    (odd,) = [s for s in sessions if s.startswith("a_thread_with_spaces.")]
    assert len(odd) == len("a_thread_with_spaces.") + 16
    assert [s for s in sessions if s.startswith("dashes_first.")]
    assert backend.read("/call_1").error  # not in the fallback session


def test_composite_backend_routes_with_the_prefix_stripped(workspace: Workspace) -> None:
    routes = WorkspaceBackend.routes(workspace, session_id="s")
    composite = CompositeBackend(default=StateBackend(), routes=routes)
    assert composite.write("/large_tool_results/call_9", TEXT).error is None
    assert composite.read("/large_tool_results/call_9").file_data["content"] == TEXT
    assert composite.grep("needle", "/large_tool_results/").matches == [
        {"path": "/large_tool_results/call_9", "line": 2, "text": "second needle"}
    ]
    files = asyncio.run(workspace.list_files("s"))
    assert [f.rsplit("/", 1)[-1] for f in files] == ["tool_result-call_9.txt"]


def test_text_with_a_lone_surrogate_stays_text(backend: WorkspaceBackend) -> None:
    """A history holding half of an emoji (a lone surrogate, as a model's cut stream leaves
    it) was stored as bytes in data/: read back as base64, refused by edit as a binary file,
    passed over by grep. It is a text file of the session, read, edited and searched as one."""
    text = "## Summary 1\nuser said \ud83d broken emoji\n"
    assert backend.write("/hist.md", text).error is None
    read = backend.read("/hist.md")
    assert read.error is None and "broken emoji" in str(read.file_data)
    edited = backend.edit("/hist.md", "## Summary 1", "## Summary 1 (edited)")
    assert edited.error is None
    found = backend.grep("broken", "/")
    assert "hist.md" in str(found)
