"""Running `ctxoffload ui` as users do (a real process on 127.0.0.1), and where the system's
Chromium is."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

INSTALL_CHROMIUM = (
    "`apt-get install chromium` (Debian's package; the tests never download a browser) or set "
    "CTXOFFLOAD_CHROMIUM to a Chromium binary"
)


@dataclass
class Ui:
    """A running `ctxoffload ui`: its process, its printed URL and what that URL holds."""

    process: subprocess.Popen[str]
    url: str
    workdir: Path | str
    before: list[str] = field(default_factory=list)  # the lines printed before the URL

    @property
    def base(self) -> str:
        parts = urllib.parse.urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def port(self) -> int:
        return int(urllib.parse.urlsplit(self.url).port or 0)

    @property
    def token(self) -> str:
        return urllib.parse.parse_qs(urllib.parse.urlsplit(self.url).query)["token"][0]


def start_ui(workdir: Path | str, *extra: str, env: dict[str, str] | None = None) -> Ui:
    """`ctxoffload --workdir WORKDIR ui --port 0 EXTRA...` (with `env`, when given), started
    and its URL read from stdout."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctxoffload",
            "--workdir",
            str(workdir),
            "ui",
            "--port",
            "0",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    before: list[str] = []
    for _ in range(3):
        line = process.stdout.readline()
        if "http://" in line:
            place = Path(workdir) if isinstance(workdir, Path) else workdir
            return Ui(process, line.strip(), place, before)
        before.append(line.strip())
    process.kill()
    raise AssertionError(f"ctxoffload ui printed no URL: {process.communicate()}")


def stop_ui(ui: Ui, timeout: float = 10) -> str:
    """Stop the server; what it wrote on stderr (warnings)."""
    ui.process.terminate()
    try:
        _, err = ui.process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        ui.process.kill()
        _, err = ui.process.communicate()
    return err


TOKEN_HEADER = "X-Ctxoffload-Token"
"""The header that carries the viewer's token on every request but the page's own address."""


@dataclass
class PlainServer:
    """Another local server the browser visits: it answers every GET with a small page and
    keeps the headers of every request it received."""

    port: int
    received: list[dict[str, str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"


@contextmanager
def plain_server() -> Iterator[PlainServer]:
    """A plain HTTP server on another port of 127.0.0.1, for as long as the block runs."""
    received: list[dict[str, str]] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            received.append(dict(self.headers.items()))
            body = b"<!doctype html><title>another local server</title><p>hello"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield PlainServer(int(server.server_address[1]), received)
    finally:
        server.shutdown()
        server.server_close()


def required_in_ci() -> bool:
    """Whether this run is CI's (`CI=true`, as CI services set it), where no test may be left
    out for want of a program the machine can install."""
    return os.environ.get("CI", "").strip().lower() == "true"


def find_chromium() -> str | None:
    """Chromium as $CTXOFFLOAD_CHROMIUM names it, else `chromium` or `chromium-browser` on
    PATH; None where there is none."""
    for candidate in (
        os.environ.get("CTXOFFLOAD_CHROMIUM"),
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


def chromium_path(tests: str = "the browser tests") -> str:
    """Where Chromium is. Without it, `tests` are skipped, with one reason for all of them
    (so pytest's summary folds them into one line), or fail where `CI=true`."""
    found = find_chromium()
    if found is not None:
        return found
    if required_in_ci():
        pytest.fail(f"CI=true and no Chromium on PATH for {tests}: {INSTALL_CHROMIUM}")
    pytest.skip(
        f"no Chromium on PATH, so {tests} did not run: to run them, {INSTALL_CHROMIUM}; "
        "where CI=true they fail instead"
    )


def artifacts() -> Path:
    """Where tests save what people look at afterwards (screenshots): $CTXOFFLOAD_ARTIFACTS,
    else .ci/artifacts in the checkout."""
    folder = Path(
        os.environ.get("CTXOFFLOAD_ARTIFACTS")
        or Path(__file__).resolve().parents[3] / ".ci" / "artifacts"
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def cli_json(workdir: Path, *args: str) -> Any:
    """`ctxoffload --workdir WORKDIR ARGS` (a --json command) as a user runs it, parsed."""
    import json

    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", "--workdir", str(workdir), *args],
        capture_output=True,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)
