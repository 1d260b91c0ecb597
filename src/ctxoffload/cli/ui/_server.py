"""`ctxoffload ui`: a local page that shows a workspace's sessions, step by step.

The page and its script come from the package (`static/`): no CDN, no build step. The
server is the standard library's, one thread a request; live updates come from watchfiles
(already a dependency, for `watch`) over server-sent events, or, for a bucket, from copying
it again every `--poll` seconds.

Safe by default: it listens on 127.0.0.1 only; the URL it prints carries a random token that
every request must present, in the `X-Ctxoffload-Token` header (the page's script sends it,
the live stream included, which the page reads with `fetch` because `EventSource` cannot send
a header) or, for the page's address and its two files only, in the query; never in a cookie,
which a browser would send to every port of 127.0.0.1. A request whose Host header is not this
server's own (DNS rebinding) is refused; it answers GET and HEAD only and writes nothing;
files are read through the agent's Read tool (`FileToolbox`), confined to the workspace;
every answer is JSON or the package's own files, with a content security policy that runs no
script but the page's own, and the page puts session content into the document as text, never
as HTML. Every request gets an answer (an error is one too); a connection has
`request_seconds` to send its whole request, and at most `max_connections` are served at once
(one more is answered 503).
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import hmac
import http.server
import io
import mimetypes
import secrets
import select
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._disk.paths import Refused
from ...exceptions import CliError
from .._arguments import EXIT_OK, add_workdir
from .._commands import COMMAND_HELP
from .._output import json_text, shown

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["UiServer", "register", "run"]

TOKEN_HEADER = "X-Ctxoffload-Token"
"""The header that carries the token. Never a cookie: a browser sends 127.0.0.1's cookies to
every port of it, so any other local server the browser visits would receive the token."""
STATIC = Path(__file__).with_name("static")
_STATIC_FILES = ("index.html", "ui.js", "ui.css")
_PAGE_ROUTES = frozenset({"/"} | {f"/{name}" for name in _STATIC_FILES})
"""What may take the token in its query: the printed address, and the page's two files, which
the browser loads by their addresses. The data (/api/...) needs the header."""
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_KEEPALIVE_SECONDS = 15.0
_GONE_CHECK_SECONDS = 1.0
"""How often a quiet live stream looks whether its client has gone."""
REQUEST_SECONDS = 10.0
"""How long a connection has, from the moment it is accepted, to send its whole request: the
request line and every header (a browser sends them as soon as it has connected). Once the
request is read there is no limit: a live stream stays open for as long as the page."""
MAX_CONNECTIONS = 32
"""How many connections are served at once, each in a thread; one more is answered 503 and
closed. A browser opens at most six to one address, and the tabs of a viewer share one live
stream."""


def register(commands: Any) -> None:
    """Add the `ui` command to the `ctxoffload` subcommands."""
    parser = commands.add_parser(
        "ui",
        help=COMMAND_HELP["ui"],
        description=(
            "Serve a local page for the workspace: its sessions, each session's timeline with "
            "what filled the window at every step, what the model was sent at a step, the "
            "stored files, the difference between two steps and search, updated live. It "
            "listens on 127.0.0.1 only, and the URL it prints carries the token every "
            "request must present. Stop it with Ctrl-C."
        ),
    )
    add_workdir(parser)
    parser.add_argument(
        "--port",
        type=int,
        default=8750,
        metavar="N",
        help="the port on 127.0.0.1 (default 8750; 0: any free port)",
    )
    parser.add_argument("--open", action="store_true", help="open the page in a browser")
    parser.add_argument(
        "--poll",
        type=float,
        default=5.0,
        metavar="S",
        help="for a bucket: copy it again every S seconds for live updates (default 5)",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=REQUEST_SECONDS,
        metavar="S",
        help=(
            "close a connection that has not sent its whole request within S seconds "
            f"(default {REQUEST_SECONDS:g})"
        ),
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        metavar="N",
        help=f"answer 503 to a connection beyond N open ones (default {MAX_CONNECTIONS})",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    from .._access import open_workspace
    from .._arguments import Workdir

    if not 0 <= args.port <= 65535:
        raise CliError(f"--port {args.port}: give a port from 1 to 65535, or 0 for any free one")
    if not args.poll > 0:
        raise CliError(f"--poll {args.poll:g}: give a number of seconds above 0")
    if not args.request_timeout > 0:
        raise CliError(f"--request-timeout {args.request_timeout:g}: give seconds above 0")
    if args.max_connections < 1:
        raise CliError(f"--max-connections {args.max_connections}: give 1 or more")
    where = Workdir.of(args)
    workdir = open_workspace(where)
    refresh: Callable[[], str] | None = None
    shown_as = None
    if where.is_bucket:
        shown_as = where.copies.display(workdir)

        def refresh() -> str:
            return open_workspace(where)

    try:
        server = UiServer(
            workdir,
            port=args.port,
            shown_as=shown_as,
            request_seconds=args.request_timeout,
            max_connections=args.max_connections,
        )
    except OSError as exc:
        raise CliError(
            f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc} (another "
            "`ctxoffload ui`? pass --port N, or --port 0 for any free port)"
        ) from None
    server.start(refresh=refresh, discard=where.copies.remove, poll=args.poll)
    print(f"ctxoffload ui: {shown(shown_as or workdir)}", flush=True)
    print(f"  {server.url}", flush=True)
    print("  (the token in the URL is what lets the page in; Ctrl-C stops)", flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(server.url)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return EXIT_OK


class UiServer:
    """The page's HTTP server on 127.0.0.1, in threads of this process.

    Args:
        workdir: the workspace folder (a bucket's local copy, for a bucket).
        port: the port; 0 for any free one.
        token: the token requests must present; a random one by default.
        shown_as: how `workdir` is shown (a bucket's URL).
        request_seconds: how long a connection has to send its whole request.
        max_connections: how many connections are served at once; one more is answered 503.
    """

    def __init__(
        self,
        workdir: str,
        *,
        port: int = 0,
        token: str | None = None,
        shown_as: str | None = None,
        request_seconds: float = REQUEST_SECONDS,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        from ._model import UiModel

        self.model = UiModel(workdir, shown_as)
        # Each thread of the server runs in a copy of this context: the paths it prints are
        # spelled as the command's are (`shown`: a bucket's URIs).
        self.context = contextvars.copy_context()
        self.token = token or secrets.token_urlsafe(24)
        self.request_seconds = request_seconds
        self.max_connections = max_connections
        self.version = 0
        self.changed: set[str] = set()
        self._changes = threading.Condition()
        self._stop = threading.Event()
        self._following = threading.Event()
        self._threads: list[threading.Thread] = []
        self._http = _Http(("127.0.0.1", port), _Handler)
        self._http.ui = self
        self._http.places = threading.BoundedSemaphore(max_connections)
        self.port = int(self._http.server_address[1])
        self.hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    @property
    def url(self) -> str:
        """The page's address, token included."""
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def start(
        self,
        *,
        refresh: Callable[[], str] | None = None,
        discard: Callable[[str], None] | None = None,
        poll: float = 5.0,
    ) -> None:
        """Serve in a thread, and follow the workspace: with watchfiles on a folder, or by
        calling `refresh` (which returns a new copy's folder) every `poll` seconds and
        `discard` with the copy it replaces, once requests reading it have had time to end.
        """
        follow = (
            self._thread(self._poll, refresh, discard, poll)
            if refresh is not None
            else self._thread(self._watch)
        )
        serve = self._thread(self._http.serve_forever)
        self._threads = [serve, follow]
        for thread in self._threads:
            thread.start()
        # A change made once the URL is printed must reach the page: wait for the watcher.
        self._following.wait(timeout=10)

    def stop(self) -> None:
        """Stop serving and following."""
        self._stop.set()
        with self._changes:
            self._changes.notify_all()
        self._http.shutdown()
        self._http.server_close()

    def note_change(self, sessions: set[str]) -> None:
        """Tell the open pages that these sessions (or the list, for an empty set) changed."""
        with self._changes:
            self.version += 1
            self.changed = sessions
            self._changes.notify_all()

    def wait_change(self, seen: int, timeout: float) -> tuple[int, set[str]]:
        """The version after `seen` and what changed, or `seen` again after `timeout`."""
        with self._changes:
            self._changes.wait_for(
                lambda: self.version != seen or self._stop.is_set(), timeout=timeout
            )
            return self.version, set(self.changed)

    def _watch(self) -> None:
        from .._watching import watch_sessions

        try:
            for touched in watch_sessions(
                self.model.workdir,
                stop_event=self._stop,
                debounce=300,
                step=100,
                rust_timeout=200,
                yield_on_timeout=True,
            ):
                self._following.set()  # the first (empty) answer: the watch is in place
                if touched:
                    self.note_change(touched)
        except Exception as exc:  # the page still works, without live updates
            print(f"ctxoffload ui: warning: live updates stopped: {exc}", file=sys.stderr)
        finally:
            self._following.set()

    def _thread(self, target: Callable[..., object], *args: object) -> threading.Thread:
        return threading.Thread(target=self.context.copy().run, args=(target, *args), daemon=True)

    def _poll(
        self, refresh: Callable[[], str], discard: Callable[[str], None] | None, poll: float
    ) -> None:
        from ._model import UiModel

        self._following.set()
        while not self._stop.wait(poll):
            try:
                folder = refresh()
            except CliError as exc:
                print(f"ctxoffload ui: warning: {exc}", file=sys.stderr)
                continue
            old = self.model
            self.model = UiModel(folder, old.shown_as)
            self.note_change(set())
            if discard is not None:
                # Later: requests reading the old copy have had time to end.
                timer = threading.Timer(60.0, discard, args=(old.workdir,))
                timer.daemon = True
                timer.start()


class _Http(http.server.ThreadingHTTPServer):
    daemon_threads = True
    ui: UiServer
    places: threading.BoundedSemaphore  # one a connection being served

    def process_request(self, request: Any, client_address: Any) -> None:
        # Decided here, in the one thread that accepts: a thread a connection, and no more
        # than `max_connections` of them, whatever the clients send (or do not send).
        if not self.places.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.places.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            self.ui.context.copy().run(super().process_request_thread, request, client_address)
        finally:
            self.places.release()

    def _refuse(self, request: socket.socket) -> None:
        """Answer 503 without a thread: a few hundred bytes that fit the socket's buffer,
        written without waiting, then the connection is closed."""
        limit = self.ui.max_connections
        body = json_text(
            {
                "error": f"too many connections to ctxoffload ui ({limit} open): close some "
                "tabs or clients and try again, or start it with --max-connections N"
            }
        ).encode()
        head = (
            "HTTP/1.0 503 Service Unavailable\r\n"
            "Content-Type: application/json; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
        )
        with contextlib.suppress(OSError):
            request.setblocking(False)
            request.send(head.encode() + body)
        self.shutdown_request(request)


class _RequestReader(io.RawIOBase):
    """The socket as the handler reads it, with one deadline for the whole request: every
    read waits only for the time left, so a client that trickles a byte now and then is cut
    off as surely as one that sends nothing."""

    def __init__(self, connection: socket.socket, seconds: float) -> None:
        self._connection = connection
        self.deadline: float | None = time.monotonic() + seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request was not complete in time")
            self._connection.settimeout(left)
        return self._connection.recv_into(buffer)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Http
    server_version = "ctxoffload-ui"
    sys_version = ""
    _answering = False  # the status line of the answer is written: no other can follow
    _reader: _RequestReader

    def setup(self) -> None:
        super().setup()
        # The request line and the headers are read through a deadline (a socket timeout
        # alone bounds each wait, not their sum: one byte every 2 s never trips it).
        self.rfile.close()
        self._reader = _RequestReader(self.connection, self.server.ui.request_seconds)
        self.rfile = io.BufferedReader(self._reader)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the terminal shows the URL and warnings only

    def parse_request(self) -> bool:
        read = super().parse_request()
        if read:  # the request is in: answer at the client's pace
            self._reader.deadline = None
            self.connection.settimeout(None)
        return read

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        self._send(405, {"error": "read-only: GET only"}, {"Allow": "GET, HEAD"})

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_POST

    def do_GET(self) -> None:
        """Answer the request, whatever happens on the way: bad input is a 4xx with what was
        wrong, anything else a 5xx with what failed, and the server goes on serving."""
        try:
            self._get()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away: nobody to answer
        except CliError as exc:
            self._fail(404 if "no session" in str(exc) else 400, str(exc))
        except Refused as exc:  # a link or special file planted in the workspace: not followed
            self._fail(400, str(exc))
        except Exception as exc:  # a bug, or the workspace changing under the reader
            what = f"{type(exc).__name__}: {exc}"
            print(f"ctxoffload ui: warning: {self.path[:200]!r}: {what}", file=sys.stderr)
            status = 404 if isinstance(exc, FileNotFoundError) else 500
            self._fail(status, f"the server could not answer this request: {what}")

    def _get(self) -> None:
        ui = self.server.ui
        if self.headers.get("Host", "") not in ui.hosts:
            self._send(403, {"error": "this Host is not the server's own (DNS rebinding?)"})
            return
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/favicon.ico":  # asked by every browser, with no token
            self._reply(204, b"", "image/x-icon")
            return
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        route = url.path
        page = route in _PAGE_ROUTES
        if not self._authorised(query.get("token") if page else None):
            error = "open the URL `ctxoffload ui` printed: it carries the token"
            if not page:
                error = (
                    f"{route} needs the token in the {TOKEN_HEADER} header (never in the "
                    f"URL, never in a cookie): open the URL `ctxoffload ui` printed, or send "
                    f"`{TOKEN_HEADER}: TOKEN`"
                )
            self._send(403, {"error": error})
            return
        if page:
            self._static("index.html" if route == "/" else route[1:])
        elif route == "/api/live":
            self._live()
        elif route.startswith("/api/"):
            self._send(200, self._api(route[len("/api/") :], query))
        else:
            self._send(404, {"error": f"no such page: {route}"})

    def _fail(self, status: int, message: str) -> None:
        """Answer with an error, unless an answer has begun (then only end the connection)."""
        self.close_connection = True
        if self._answering:
            return
        with contextlib.suppress(OSError):  # the client went away meanwhile
            self._send(status, {"error": message})

    def _authorised(self, in_query: str | None) -> bool:
        token = self.server.ui.token.encode()
        offered = [in_query, self.headers.get(TOKEN_HEADER)]
        return any(o is not None and hmac.compare_digest(o.encode(), token) for o in offered)

    def _api(self, name: str, query: dict[str, str]) -> Any:
        model = self.server.ui.model
        if name == "sessions":
            return model.sessions()
        if name == "session":
            return model.session(_required(query, "session"))
        if name == "step":
            return model.step(
                _required(query, "session"),
                _number(query, "step"),
                full=query.get("full") == "1",
            )
        if name == "diff":
            return model.diff(
                _required(query, "session"), _number(query, "from"), _number(query, "to")
            )
        if name == "file":
            return model.read(_required(query, "path"), _number(query, "offset", 1))
        if name == "search":
            return model.search(
                _required(query, "pattern"),
                query.get("session") or None,
                fixed=query.get("fixed") == "1",
                ignore_case=query.get("ignore_case") == "1",
            )
        raise CliError(f"no such request: /api/{name}")

    def _static(self, name: str) -> None:
        body = (STATIC / name).read_bytes()
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if name == "index.html":
            # The browser loads the page's two files by address, with no header of ours: the
            # address carries the token, as the page's own does. A cookie would reach every
            # port of 127.0.0.1; the page's script sends the header on every other request.
            token = urllib.parse.quote(self.server.ui.token, safe="").encode()
            for file in (b"ui.js", b"ui.css"):
                body = body.replace(b'"%s"' % file, b'"%s?token=%s"' % (file, token))
        self._reply(200, body, f"{kind}; charset=utf-8")

    def _live(self) -> None:
        """Server-sent events: `change` with the sessions that changed, as they change."""
        ui = self.server.ui
        self._answering = True
        self.send_response(200)
        self._headers("text/event-stream; charset=utf-8")
        self.end_headers()
        if self.command == "HEAD":
            return
        seen = ui.version
        self.wfile.write(b"retry: 2000\n\n")
        self.wfile.flush()
        quiet_since = time.monotonic()
        while not ui._stop.is_set():
            version, sessions = ui.wait_change(seen, _GONE_CHECK_SECONDS)
            if version != seen:
                seen = version
                data = json_text({"version": version, "sessions": sorted(sessions)})
                self.wfile.write(f"event: change\ndata: {data}\n\n".encode())
            elif self._client_gone():
                # A closed tab: its place is free now, not at the next keep-alive (a write
                # to a closed socket fails only at the second one, 30 s on).
                self.close_connection = True
                return
            elif time.monotonic() - quiet_since >= _KEEPALIVE_SECONDS:
                self.wfile.write(b": keep-alive\n\n")
            else:
                continue
            quiet_since = time.monotonic()
            self.wfile.flush()

    def _client_gone(self) -> bool:
        """Whether the client of a live stream has closed its end (it sends nothing more
        once its request is in: what it may still send is only looked at, never read)."""
        waiting = select.poll()  # not select.select: a descriptor may be above 1023
        waiting.register(self.connection, select.POLLIN)
        if not waiting.poll(0):
            return False
        try:
            return not self.connection.recv(1, socket.MSG_PEEK)
        except OSError:  # reset by the client
            return True

    def _send(self, status: int, value: Any, extra: dict[str, str] | None = None) -> None:
        # ensure_ascii: a lone surrogate (a byte that was not UTF-8) goes out as an escape.
        body = json_text(value).encode()
        self._reply(status, body, "application/json; charset=utf-8", extra)

    def _reply(
        self, status: int, body: bytes, kind: str, extra: dict[str, str] | None = None
    ) -> None:
        self._answering = True
        self.send_response(status)
        self._headers(kind)
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _headers(self, kind: str) -> None:
        self.send_header("Content-Type", kind)
        self.send_header("Content-Security-Policy", _POLICY)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")


def _required(query: dict[str, str], name: str) -> str:
    value = query.get(name)
    if not value:
        raise CliError(f"the request needs {name}=")
    return value


def _number(query: dict[str, str], name: str, default: int | None = None) -> int:
    text = query.get(name)
    if text is None and default is not None:
        return default
    try:
        return int(text or "")
    except ValueError:
        raise CliError(f"{name}={text!r} is not a whole number") from None
