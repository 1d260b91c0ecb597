"""`ctxoffload ui` over HTTP: the token, the Host check, read-only, confinement, and answers
that agree with `show --json` and `grep --json`. A real server process; requests from
http.client, so every header is the test's choice."""

from __future__ import annotations

import asyncio
import http.client
import itertools
import json
import os
import queue
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from ui_running import TOKEN_HEADER, Ui, cli_json, start_ui, stop_ui

from ctxoffload._disk.events import EventKind
from helpers import chain_of_sub_agents, snapshot_tree

# A bound on every wait, so that a broken server fails the test instead of hanging the suite;
# not a speed check.
PATIENCE = 120.0


def request(
    ui: Ui,
    path: str,
    *,
    method: str = "GET",
    token: str | None = "ui",
    host: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request; `token="ui"` sends the server's own token in its header, as the page does."""
    if token == "ui":
        token = ui.token
    sent = {"Host": host if host is not None else f"127.0.0.1:{ui.port}"}
    if token is not None:
        sent[TOKEN_HEADER] = token
    sent.update(headers or {})
    connection = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=30)
    connection.putrequest(method, path, skip_host=True)
    for name, value in sent.items():
        connection.putheader(name, value)
    connection.endheaders()
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, dict(response.getheaders()), body


def api(ui: Ui, name: str, **params: Any) -> Any:
    status, _, body = request(ui, f"/api/{name}?{urllib.parse.urlencode(params)}")
    assert status == 200, body
    return strict_json(body)


def strict_json(body: bytes) -> Any:
    """`body` parsed as a browser parses JSON: NaN and Infinity are no JSON."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} is not JSON: {body[:300]!r}")

    return json.loads(body, parse_constant=refuse)


def live_changes(ui: Ui) -> queue.Queue[set[str]]:
    """The sessions each `change` event of a new /api/live stream names, as they come."""
    connection = http.client.HTTPConnection("127.0.0.1", ui.port, timeout=PATIENCE)
    connection.request(
        "GET", "/api/live", headers={"Host": f"127.0.0.1:{ui.port}", TOKEN_HEADER: ui.token}
    )
    response = connection.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type", "").startswith("text/event-stream")
    assert response.readline() == b"retry: 2000\n"
    found: queue.Queue[set[str]] = queue.Queue()

    def pump() -> None:
        try:
            while line := response.readline():
                if line.startswith(b"data: "):
                    found.put(set(json.loads(line[len(b"data: ") :])["sessions"]))
        except OSError:
            pass  # the server stopped

    threading.Thread(target=pump, daemon=True).start()
    return found


def next_change(changes: queue.Queue[set[str]]) -> set[str]:
    try:
        return changes.get(timeout=PATIENCE)
    except queue.Empty:
        raise AssertionError(f"no change event within {PATIENCE:g} s") from None


def append_event(workdir: Path, session: str) -> None:
    """A line appended to a session's events.jsonl, as a writer appends one."""
    (workdir / "sessions" / session).mkdir(parents=True, exist_ok=True)
    with (workdir / "sessions" / session / "events.jsonl").open("a") as log:
        log.write(json.dumps({"time": "2026-11-24T00:00:00+00:00", "kind": "note"}) + "\n")


# -- who may ask --------------------------------------------------------------------------------


def test_every_request_must_present_the_printed_token(ui: Ui) -> None:
    for path in ("/", "/ui.js", "/api/sessions", "/api/session?session=nightly-job", "/api/live"):
        assert request(ui, path, token=None)[0] == 403
        assert request(ui, path, token="not-the-token")[0] == 403
        assert request(ui, path, token=ui.token[:-1])[0] == 403
    for path in ("/", "/ui.js", "/api/sessions", "/api/session?session=nightly-job"):
        assert request(ui, path)[0] == 200


def with_query_token(ui: Ui, path: str) -> str:
    return path + ("&" if "?" in path else "?") + urllib.parse.urlencode({"token": ui.token})


def test_the_token_is_in_no_cookie_and_the_data_only_comes_with_the_header(ui: Ui) -> None:
    """A browser sends 127.0.0.1's cookies to every port of it, so the token is never a
    cookie. The address `ctxoffload ui` prints carries it in its query (a browser can open
    nothing else), and so do the page's two files; what a session holds comes only to a
    request with the token in its header, which no other page can make a browser send."""
    for path in ("/", "/ui.js", "/ui.css"):
        status, headers, _ = request(ui, with_query_token(ui, path), token=None)
        assert status == 200, path
        assert "Set-Cookie" not in headers, path
    status, headers, _ = request(ui, "/")
    assert "Set-Cookie" not in headers
    for path in ("/api/sessions", "/api/session?session=nightly-job", "/api/live"):
        status, _, body = request(ui, with_query_token(ui, path), token=None)
        assert status == 403, path
        assert TOKEN_HEADER.encode() in body, body
    # A cookie holding the token (as an earlier version set) lets nothing in.
    for name in (f"ctxoffload_ui_token_{ui.port}", "token"):
        jar = {"Cookie": f"{name}={ui.token}"}
        for path in ("/", "/api/sessions"):
            assert request(ui, path, token=None, headers=jar)[0] == 403, (name, path)


def test_a_request_for_another_host_is_refused(ui: Ui) -> None:
    """DNS rebinding: a page of evil.example resolved to 127.0.0.1 sends its own Host."""
    for host in (f"evil.example:{ui.port}", "127.0.0.1", f"127.0.0.1:{ui.port + 1}", ""):
        status, _, body = request(ui, "/api/sessions", host=host)
        assert status == 403, host
        assert b"Host" in body
    assert request(ui, "/api/sessions", host=f"localhost:{ui.port}")[0] == 200


def test_it_listens_on_loopback_only(ui: Ui) -> None:
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=False).stdout
    mine = [line for line in out.splitlines() if f":{ui.port} " in line]
    if not mine:  # no ss here: ask /proc instead
        port = f"{ui.port:04X}"
        rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
        mine = [r.split()[1] for r in rows if r.split()[1].endswith(f":{port}")]
        assert mine and all(local.startswith("0100007F:") for local in mine), mine
    else:
        assert all("127.0.0.1:" in line for line in mine), mine


@pytest.mark.slow
def test_it_writes_nothing_and_answers_get_only(ui: Ui) -> None:
    before = snapshot_tree(ui.workdir)
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, headers, _ = request(ui, "/api/sessions", method=method)
        assert status == 405 and headers["Allow"] == "GET, HEAD"
    for name, params in [
        ("sessions", {}),
        ("session", {"session": "nightly-job"}),
        ("step", {"session": "nightly-job", "step": 4}),
        ("diff", {"session": "nightly-job", "from": 3, "to": 4}),
        ("file", {"path": "sessions/nightly-job/context.jsonl"}),
        ("search", {"pattern": "ERROR"}),
    ]:
        api(ui, name, **params)
    assert snapshot_tree(ui.workdir) == before


def test_answers_carry_a_policy_that_runs_no_foreign_script(ui: Ui) -> None:
    for path in ("/", "/api/sessions"):
        _, headers, _ = request(ui, path)
        policy = headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"
    _, headers, _ = request(ui, "/api/file?path=sessions/nightly-job/tool_result-call_1.txt")
    assert headers["Content-Type"].startswith("application/json")


# -- what it serves agrees with the other commands ---------------------------------------------


def test_each_steps_parts_are_the_recorded_ones(ui: Ui) -> None:
    shown = cli_json(ui.workdir, "show", "nightly-job", "--json")
    recorded = {e["step"]: e for e in shown["events"] if e["kind"] == EventKind.MODEL_CALL}
    steps = api(ui, "session", session="nightly-job")["steps"]
    assert [s["step"] for s in steps] == sorted(recorded)
    for step in steps:
        event = recorded[step["step"]]
        assert step["window"] == event["window"]
        assert step["tokens_counted"] == event["tokens_counted"]
        assert sum(step["window"].values()) == event["tokens_counted"]
        assert step["context_window"] == event["context_window"]
        assert step["trigger_tokens"] == event["trigger_tokens"]
    marks = [m["mark"] for s in steps for m in s["marks"]]
    assert "compression" in marks and "offload" in marks


@pytest.mark.slow
def test_a_step_is_what_show_step_prints(ui: Ui) -> None:
    for step in (1, 4, 12):
        sent = cli_json(ui.workdir, "show", "nightly-job", "--step", str(step), "--json")
        served = api(ui, "step", session="nightly-job", step=step)
        assert [m["id"] for m in served["messages"]] == [m["id"] for m in sent["messages"]]
        assert [m["role"] for m in served["messages"]] == [m["role"] for m in sent["messages"]]
    paths = {
        part["path"]
        for m in api(ui, "step", session="nightly-job", step=12)["messages"]
        for part in m["parts"]
        if "path" in part
    }
    assert "sessions/nightly-job/context.jsonl" in paths
    assert any(p.startswith("sessions/nightly-job/tool_result-") for p in paths)
    for path in paths:  # every link opens
        assert not api(ui, "file", path=path)["error"], path


@pytest.mark.slow
def test_search_finds_what_grep_finds(ui: Ui) -> None:
    for pattern, flags in [
        ("ERROR", {}),
        ("order_id=ORD-5821", {"fixed": "1"}),
        ("error", {"ignore_case": "1"}),
    ]:
        args = (
            ["grep", "--json"]
            + (["-F"] if flags.get("fixed") else [])
            + (["-i"] if flags.get("ignore_case") else [])
            + [pattern]
        )
        hits = cli_json(ui.workdir, *args)
        served = api(ui, "search", pattern=pattern, **flags)
        assert served["total"] == len(hits)
        expected = [(os.path.relpath(h["file"], ui.workdir), h["line"]) for h in hits][:500]
        assert [(m["path"], m["line"]) for m in served["matches"]] == expected


def test_the_sessions_are_the_rows_ls_lists(own_demo: Path) -> None:
    """The list the page shows is `ls`'s own rows (one reader, `cli/_view/`): sub-agents
    under their parent, and a file neither can read named the same way; the page lists them
    by id, `ls` the newest first."""
    asyncio.run(chain_of_sub_agents(own_demo, 3))
    result = own_demo / "sessions" / "nightly-job" / "tool_result-call_1.txt"
    os.link(result, own_demo / "elsewhere.txt")  # a hard link: neither reads the file
    listed = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "--workdir", str(own_demo), "ls", "--json"],
        capture_output=True,
        check=False,
    )
    assert listed.returncode == 2 and b"hard link" in listed.stderr
    rows = json.loads(listed.stdout)
    ui = start_ui(own_demo)
    try:
        served = api(ui, "sessions")["sessions"]
    finally:
        stop_ui(ui)
    assert sorted(rows, key=lambda r: r["session"]) == served
    assert [(r["session"], r["depth"]) for r in served] == [
        ("nightly-job", 0),
        ("s0000", 0),
        ("s0001", 1),
        ("s0002", 2),
    ]
    assert served[0]["unreadable"] == ["tool_result-call_1.txt"]


def test_the_difference_between_two_steps(ui: Ui) -> None:
    first = api(ui, "step", session="nightly-job", step=4)["messages"]
    second = api(ui, "step", session="nightly-job", step=5)["messages"]
    diff = api(ui, "diff", session="nightly-job", **{"from": 4, "to": 5})
    ids_before = {m["id"] for m in first}
    ids_after = {m["id"] for m in second}
    assert {m["id"] for m in diff["left"]} == ids_before - ids_after
    assert {m["id"] for m in diff["entered"]} == ids_after - ids_before
    assert diff["kept"] == len(ids_before & ids_after)
    assert diff["left"], "step 5 follows the demo's first compression: messages left"


# -- hostile input -----------------------------------------------------------------------------


@pytest.mark.slow
def test_hostile_paths_and_session_ids_get_an_error_not_a_file(
    own_demo: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret\n")
    session = own_demo / "sessions" / "nightly-job"
    (session / "tool_result-link.txt").symlink_to(secret)
    os.link(secret, session / "tool_result-hard.txt")
    os.mkfifo(session / "tool_result-fifo.txt")
    ui = start_ui(own_demo)
    try:
        for path in (
            str(secret),
            "../secret.txt",
            "sessions/../../secret.txt",
            "sessions/nightly-job/tool_result-link.txt",
            "sessions/nightly-job/tool_result-hard.txt",
            "sessions/nightly-job/tool_result-fifo.txt",
            "/etc/passwd",
        ):
            answer = api(ui, "file", path=path)
            assert answer["error"], path
            assert "the secret" not in answer["text"] and "root:" not in answer["text"]
        for session_id in ("../nightly-job", "/etc", "nightly-job/../x", "no-such", "a\x00b"):
            status, _, body = request(
                ui, f"/api/session?{urllib.parse.urlencode({'session': session_id})}"
            )
            assert status in (400, 404), (session_id, body)
            assert "error" in json.loads(body)
        for bad in ("/api/step?session=nightly-job&step=x", "/api/nothing", "/../etc/passwd"):
            assert request(ui, bad)[0] in (400, 404)
    finally:
        stop_ui(ui)


@pytest.mark.slow
def test_a_search_keeps_its_matches_when_a_file_cannot_be_read(
    own_demo: Path, tmp_path: Path
) -> None:
    """`grep` exits 2 when it could not read a file, after printing what the others hold: the
    page gets those matches, and what grep said as a note, at every search."""
    expected = [
        (os.path.relpath(hit["file"], own_demo), hit["line"])
        for hit in cli_json(own_demo, "grep", "--json", "ERROR")
    ]
    outside = tmp_path / "outside.txt"
    outside.write_text("ERROR the secret\n")
    os.link(outside, own_demo / "sessions" / "nightly-job" / "tool_result-hard.txt")
    ui = start_ui(own_demo)
    try:
        for _ in range(2):  # the next search too
            served = api(ui, "search", pattern="ERROR")
            assert expected and [(m["path"], m["line"]) for m in served["matches"]] == expected
            assert served["total"] == len(expected)
            (note,) = served["notes"]
            assert "tool_result-hard.txt: has 2 hard links" in note, note
            assert "the secret" not in json.dumps(served)
    finally:
        stop_ui(ui)


def test_a_link_planted_in_place_of_sessions_gets_a_4xx_that_names_it(
    own_demo: Path, tmp_path: Path
) -> None:
    ui = start_ui(own_demo)
    try:
        # Swapped while the server runs (at start it refuses such a workspace).
        (own_demo / "sessions").rename(tmp_path / "elsewhere")
        (own_demo / "sessions").symlink_to(tmp_path / "elsewhere")
        for path in (
            "/api/session?session=nightly-job",
            "/api/step?session=nightly-job&step=1",
        ):
            status, _, body = request(ui, path)
            assert status == 400, (path, body)
            error = strict_json(body)["error"]
            assert error.startswith(f"{own_demo / 'sessions'} is a symbolic link"), error
            assert "\n" not in error
    finally:
        said = stop_ui(ui)
    assert "could not answer" not in said and "Traceback" not in said


def test_numbers_json_cannot_spell_arrive_as_their_names(odd_numbers: Path) -> None:
    """NaN, Infinity and -Infinity in a record (Python's json reads them; no browser does)
    are sent as the strings "NaN", "Infinity" and "-Infinity"; every answer parses."""
    ui = start_ui(odd_numbers)
    try:
        assert api(ui, "sessions")["sessions"][0]["session"] == "odd-numbers"
        session = api(ui, "session", session="odd-numbers")
        (step,) = session["steps"]
        assert step["context_window"] == "NaN"
        assert (step["tokens_counted"], step["input_tokens"]) == ("Infinity", "-Infinity")
        assert step["trigger_tokens"] is None  # a trigger_ratio of Infinity draws no line
        assert api(ui, "step", session="odd-numbers", step=1)["messages"][0]["id"] == "m1"
        api(ui, "diff", session="odd-numbers", **{"from": 1, "to": 1})
        assert "NaN" in api(ui, "search", pattern="NaN")["matches"][0]["text"]
    finally:
        stop_ui(ui)


@pytest.mark.slow
def test_a_chain_of_1200_sub_agents_is_listed(tmp_path: Path) -> None:
    names = asyncio.run(chain_of_sub_agents(tmp_path / "ws", 1200))
    ui = start_ui(tmp_path / "ws")
    try:
        rows = api(ui, "sessions")["sessions"]
    finally:
        stop_ui(ui)
    assert [(r["session"], r["depth"]) for r in rows] == [(n, d) for d, n in enumerate(names)]


# -- every request gets an answer --------------------------------------------------------------


def test_a_nul_in_a_search_gets_a_4xx_that_says_so(ui: Ui) -> None:
    for params in ({"pattern": "a\x00b"}, {"pattern": "\x00", "fixed": "1"}):
        status, headers, body = request(ui, "/api/search?" + urllib.parse.urlencode(params))
        assert status == 400, (params, body)
        assert headers["Content-Type"].startswith("application/json")
        assert "NUL" in strict_json(body)["error"]
    assert api(ui, "sessions")["sessions"]  # and it goes on serving


def test_a_workspace_removed_under_the_server_gets_answers(own_demo: Path) -> None:
    ui = start_ui(own_demo)
    try:
        shutil.rmtree(own_demo / "sessions")
        for path in (
            "/api/sessions",
            "/api/session?session=nightly-job",
            "/api/step?session=nightly-job&step=1",
            "/api/search?pattern=x",
        ):
            status, _, body = request(ui, path)
            assert status == 404, (path, body)
            assert "sessions/ folder" in strict_json(body)["error"] or "no session" in str(body)
        assert request(ui, "/")[0] == 200
    finally:
        said = stop_ui(ui)
    assert "Traceback" not in said


@pytest.mark.slow
def test_a_silent_connection_is_closed_and_a_live_stream_stays_open(own_demo: Path) -> None:
    """A client that connects and sends nothing, or half a request line, is let go after a
    while; a live stream (long-lived on purpose) outlasts that and still brings changes."""
    ui = start_ui(own_demo)
    try:
        changes = live_changes(ui)
        silent = socket.create_connection(("127.0.0.1", ui.port), timeout=PATIENCE)
        half = socket.create_connection(("127.0.0.1", ui.port), timeout=PATIENCE)
        half.sendall(b"GET /api/sess")
        for connection in (silent, half):
            with connection:
                assert connection.recv(1) == b"", "the server answered a request never sent"
        append_event(own_demo, "nightly-job")
        assert "nightly-job" in next_change(changes)
    finally:
        stop_ui(ui)


def trickle(port: int) -> None:
    """A client that sends a request one byte at a time, a byte every 0.1 s, and never ends
    it; returns once the server has cut it off."""
    endless = f"GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode()
    deadline = time.monotonic() + PATIENCE
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as connection:
        for sent in itertools.count():
            assert time.monotonic() < deadline, f"still open after {sent} bytes, one every 0.1 s"
            try:
                connection.sendall(endless[sent : sent + 1] or b"a")
                readable, _, _ = select.select([connection], [], [], 0.1)
                if readable and connection.recv(1) == b"":
                    return  # closed
            except (BrokenPipeError, ConnectionResetError):
                return
            assert not readable, "the server answered a request never finished"


@pytest.mark.slow
def test_a_trickling_client_is_cut_off_and_others_are_served_meanwhile(own_demo: Path) -> None:
    """One byte every 0.1 s never leaves a connection idle for long: it is the time to read
    the whole request that is bounded (`--request-timeout`)."""
    ui = start_ui(own_demo, "--request-timeout", "1")
    try:
        slow = threading.Thread(target=trickle, args=(ui.port,))
        slow.start()
        assert api(ui, "sessions")["sessions"]  # served while the slow client trickles
        slow.join()  # ends: the slow client was cut off
        trickle(ui.port)
        assert api(ui, "sessions")["sessions"]
    finally:
        stop_ui(ui)


@pytest.mark.slow
def test_connections_beyond_the_limit_are_refused_until_one_ends(own_demo: Path) -> None:
    ui = start_ui(own_demo, "--request-timeout", "2", "--max-connections", "2")
    try:
        held = [socket.create_connection(("127.0.0.1", ui.port), timeout=PATIENCE) for _ in "ab"]
        for connection in held:
            connection.sendall(b"GET /api/sess")  # half a request: each holds a place
        with socket.create_connection(("127.0.0.1", ui.port), timeout=PATIENCE) as refused:
            answer = b"".join(iter(lambda: refused.recv(65536), b""))
        assert answer.startswith(b"HTTP/1.0 503 "), answer
        assert b"--max-connections" in answer
        for connection in held:  # the two are cut off at the request's time limit
            with connection:
                assert connection.recv(1) == b""
        deadline = time.monotonic() + PATIENCE
        while (status := request(ui, "/api/sessions")[0]) == 503:  # a place is free again
            assert time.monotonic() < deadline, "no place freed"
            time.sleep(0.05)
        assert status == 200
    finally:
        stop_ui(ui)


def test_a_live_stream_the_client_closed_frees_its_place(own_demo: Path) -> None:
    """A tab closed ends its stream on the server at once, not at the next keep-alive (15 s,
    or 30 s until a write fails): meanwhile its place was taken, and a reopened tab got 503."""
    ui = start_ui(own_demo, "--max-connections", "1")
    try:
        with socket.create_connection(("127.0.0.1", ui.port), timeout=PATIENCE) as stream:
            stream.sendall(
                f"GET /api/live HTTP/1.1\r\nHost: 127.0.0.1:{ui.port}\r\n"
                f"{TOKEN_HEADER}: {ui.token}\r\n\r\n".encode()
            )
            received = b""
            while b"retry: 2000" not in received:
                received += stream.recv(65536)
            stream.shutdown(socket.SHUT_WR)  # the client is done: the server sees its end
            # The server ends the stream before its next keep-alive is due.
            while chunk := stream.recv(65536):
                assert b"keep-alive" not in chunk, "the stream outlived its client"
        deadline = time.monotonic() + PATIENCE
        while (status := request(ui, "/api/sessions")[0]) == 503:  # its place is freed
            assert time.monotonic() < deadline, "no place freed"
            time.sleep(0.05)
        assert status == 200
    finally:
        said = stop_ui(ui)
    assert "Traceback" not in said


# -- live --------------------------------------------------------------------------------------


def test_live_updates_name_the_session_that_changed(own_demo: Path) -> None:
    ui = start_ui(own_demo)
    try:
        changes = live_changes(ui)
        append_event(own_demo, "nightly-job")
        assert "nightly-job" in next_change(changes)
    finally:
        stop_ui(ui)


def inotify_watches(pid: int) -> int:
    """How many folders process `pid` watches with inotify (Linux)."""
    watches = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify":
                info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
                watches += sum(line.startswith("inotify wd:") for line in info.splitlines())
        except FileNotFoundError:
            continue  # closed meanwhile
    return watches


def test_live_updates_follow_no_link_out_of_the_workspace(own_demo: Path, tmp_path: Path) -> None:
    """A link planted in a session folder, to a tree outside: nothing in that tree is watched
    or reported; a session that appears later is followed."""
    outside = tmp_path / "outside"
    folders = [outside / f"d{n}" for n in range(40)]
    for folder in folders:
        folder.mkdir(parents=True)
    (own_demo / "sessions" / "nightly-job" / "outside").symlink_to(outside)
    append_event(own_demo, "other")
    ui = start_ui(own_demo)
    try:
        assert inotify_watches(ui.process.pid) < len(folders)
        changes = live_changes(ui)
        (folders[7] / "written-outside.txt").write_text("x")
        append_event(own_demo, "other")
        seen = next_change(changes)
        while "other" not in seen:
            assert "nightly-job" not in seen, seen
            seen = next_change(changes)
        assert "nightly-job" not in seen, seen
        append_event(own_demo, "later")  # a session that appears now
        while "later" not in next_change(changes):
            pass
        append_event(own_demo, "later")  # and is watched from then on
        while "later" not in next_change(changes):
            pass
    finally:
        stop_ui(ui)


def test_a_busy_port_is_a_clear_error(ui: Ui) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxoffload",
            "--workdir",
            str(ui.workdir),
            "ui",
            "--port",
            str(ui.port),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{ui.port}" in done.stderr and "--port 0" in done.stderr


def test_not_a_workspace_is_a_clear_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "--workdir", str(tmp_path / "none"), "ui"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "ctxoffload" in done.stderr


def test_the_other_commands_and_import_pay_nothing_for_it() -> None:
    code = (
        "import sys, io, contextlib, ctxoffload\n"
        "from ctxoffload.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--help'])\n"
        "loaded = [m for m in sys.modules if 'ui' in m.split('.')[-1] and 'ctxoffload' in m]\n"
        "print(loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "[]", done


@pytest.mark.parametrize("port", ["-1", "70000"])
def test_a_bad_port_is_a_usage_error(demo_workspace: Path, port: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxoffload",
            "--workdir",
            str(demo_workspace),
            "ui",
            "--port",
            port,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "--port" in done.stderr


def test_the_timeline_is_what_show_prints(ui: Ui) -> None:
    """Each summary once, under its compression, as `show` prints it (one `Timeline`)."""
    shown = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "--workdir", str(ui.workdir), "show", "nightly-job"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()[1:]
    shown = shown[: shown.index("data files:")] if "data files:" in shown else shown
    served = api(ui, "session", session="nightly-job")["lines"]
    assert [line for entry in served for line in entry["lines"]] == shown
    assert [e["index"] for e in served] == sorted(e["index"] for e in served)
    assert not any(e["kind"] == "summary" for e in served)
