"""`ctxoffload ui`: a local page that shows a workspace's sessions, step by step.

The page and its script come from the package (`_ui_static/`): no CDN, no build step. The
server is the standard library's, one thread a request; live updates come from watchfiles
(already a dependency, for `watch`) over server-sent events, or, for a bucket, from copying
it again every `--poll` seconds.

Safe by default, as Jupyter is: it listens on 127.0.0.1 only; the URL it prints carries a
random token that every request must present (in the query, in the `X-Ctxoffload-Token`
header, or in the cookie the page's first load sets, named for the port); a request whose
Host header is not this server's own (DNS rebinding) is refused; it answers GET and HEAD
only and writes nothing; files are read through the agent's Read tool (`FileToolbox`),
confined to the workspace; every answer is JSON or the package's own files, with a content
security policy that runs no script but the page's own, and the page puts session content
into the document as text, never as HTML. Every request gets an answer (an error is one too),
and a connection that sends nothing for `REQUEST_SECONDS` before its request is in is closed.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import http.server
import mimetypes
import secrets
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..exceptions import CliError
from ._arguments import EXIT_OK, add_workdir
from ._commands import COMMAND_HELP
from ._output import json_text, shown

__all__ = ["UiServer", "register", "run"]

TOKEN_HEADER = "X-Ctxoffload-Token"
COOKIE_PREFIX = "ctxoffload_ui_token_"
"""The token cookie's name, followed by the port: a browser sends 127.0.0.1's cookies to every
port of it, so two viewers on two ports each need a cookie of their own."""
STATIC = Path(__file__).with_name("_ui_static")
_STATIC_FILES = ("index.html", "ui.js", "ui.css")
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_KEEPALIVE_SECONDS = 15.0
REQUEST_SECONDS = 10.0
"""How long a connection may go without sending anything while its request is read (a
browser sends the request as soon as it has connected). Once the request is read there is no
limit: a live stream stays open for as long as the page."""


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
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    from ._arguments import is_store_url, workdir_text
    from ._reading import open_workspace

    if not 0 <= args.port <= 65535:
        raise CliError(f"--port {args.port}: give a port from 1 to 65535, or 0 for any free one")
    if not args.poll > 0:
        raise CliError(f"--poll {args.poll:g}: give a number of seconds above 0")
    text = workdir_text(args)
    workdir = open_workspace(args)
    refresh: Callable[[], str] | None = None
    shown_as = None
    if is_store_url(text):
        from ._bucket import display

        shown_as = display(workdir)

        def refresh() -> str:
            return open_workspace(args)

    try:
        server = UiServer(workdir, port=args.port, shown_as=shown_as)
    except OSError as exc:
        raise CliError(
            f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc} (another "
            "`ctxoffload ui`? pass --port N, or --port 0 for any free port)"
        ) from None
    server.start(refresh=refresh, poll=args.poll)
    print(f"ctxoffload ui: {shown(shown_as or workdir)}", flush=True)
    print(f"  {server.url}", flush=True)
    print("  (the token in the URL is what lets the page in; Ctrl-C stops)", flush=True)
    import signal

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # ends as Ctrl-C does: a bucket's copies are removed

    signal.signal(signal.SIGTERM, stop)
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
    """

    def __init__(
        self,
        workdir: str,
        *,
        port: int = 0,
        token: str | None = None,
        shown_as: str | None = None,
    ) -> None:
        from ._ui_model import UiModel

        self.model = UiModel(workdir, shown_as)
        self.token = token or secrets.token_urlsafe(24)
        self.version = 0
        self.changed: set[str] = set()
        self._changes = threading.Condition()
        self._stop = threading.Event()
        self._following = threading.Event()
        self._threads: list[threading.Thread] = []
        self._http = _Http(("127.0.0.1", port), _Handler)
        self._http.ui = self
        self.port = int(self._http.server_address[1])
        self.hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        self.cookie = f"{COOKIE_PREFIX}{self.port}"

    @property
    def url(self) -> str:
        """The page's address, token included."""
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def start(self, *, refresh: Callable[[], str] | None = None, poll: float = 5.0) -> None:
        """Serve in a thread, and follow the workspace: with watchfiles on a folder, or by
        calling `refresh` (which returns a new copy's folder) every `poll` seconds."""
        follow = (
            threading.Thread(target=self._poll, args=(refresh, poll), daemon=True)
            if refresh is not None
            else threading.Thread(target=self._watch, daemon=True)
        )
        serve = threading.Thread(target=self._http.serve_forever, daemon=True)
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
        from ._watching import watch_sessions

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

    def _poll(self, refresh: Callable[[], str], poll: float) -> None:
        from ._ui_model import UiModel

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
            _remove_later(old.workdir)


def _remove_later(folder: str) -> None:
    """Delete a superseded copy of a bucket once requests reading it have had time to end."""
    from ._bucket import remove_copy

    timer = threading.Timer(60.0, remove_copy, args=(folder,))
    timer.daemon = True
    timer.start()


class _Http(http.server.ThreadingHTTPServer):
    daemon_threads = True
    ui: UiServer


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Http
    server_version = "ctxoffload-ui"
    sys_version = ""
    # Set on the socket before the request is read (`StreamRequestHandler.setup`): a client
    # that sends nothing, or half a request line, no longer holds a thread forever.
    timeout = REQUEST_SECONDS
    _answering = False  # the status line of the answer is written: no other can follow

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the terminal shows the URL and warnings only

    def parse_request(self) -> bool:
        read = super().parse_request()
        if read:
            self.connection.settimeout(None)  # the request is in: answer at the client's pace
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
        if not self._authorised(query.get("token")):
            self._send(
                403,
                {"error": "open the URL `ctxoffload ui` printed: it carries the token"},
            )
            return
        route = url.path
        if route == "/" or route in {f"/{name}" for name in _STATIC_FILES}:
            self._static("index.html" if route == "/" else route[1:], query)
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

    def _authorised(self, given: str | None) -> bool:
        ui = self.server.ui
        token = ui.token.encode()
        offered = [given, self.headers.get(TOKEN_HEADER)]
        for part in (self.headers.get("Cookie") or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == ui.cookie:
                offered.append(value)
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

    def _static(self, name: str, query: dict[str, str]) -> None:
        body = (STATIC / name).read_bytes()
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        extra: dict[str, str] = {}
        if name == "index.html" and query.get("token"):
            # The page's later requests (and a reload) carry it as a cookie no script can
            # read; Strict: no other site's page sends it. Cookies are not kept apart by
            # port, so the name holds the port: another viewer's cookie is another cookie.
            ui = self.server.ui
            extra["Set-Cookie"] = f"{ui.cookie}={ui.token}; HttpOnly; SameSite=Strict; Path=/"
        self._reply(200, body, f"{kind}; charset=utf-8", extra)

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
        while not ui._stop.is_set():
            version, sessions = ui.wait_change(seen, _KEEPALIVE_SECONDS)
            if version == seen:
                self.wfile.write(b": keep-alive\n\n")
            else:
                seen = version
                data = json_text({"version": version, "sessions": sorted(sessions)})
                self.wfile.write(f"event: change\ndata: {data}\n\n".encode())
            self.wfile.flush()

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
