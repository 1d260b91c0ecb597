"""Running `ctxoffload watch` as users do (a real process, ended with Ctrl-C), for the watch
tests on a folder and on a database."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
from collections.abc import Mapping

from helpers import ctrl_c_reaches_children

PATIENCE = 60.0
"""A bound so a loaded machine cannot hang the suite, not a speed check."""


def start_watch(
    *args: str, prefix: tuple[str, ...] = (), env: Mapping[str, str] | None = None
) -> subprocess.Popen[str]:
    """`ctxoffload watch ARGS...`, unbuffered, in a process group Ctrl-C reaches (`env`: what
    to add to this process's environment)."""
    with ctrl_c_reaches_children():
        return subprocess.Popen(
            [*prefix, sys.executable, "-m", "ctxoffload", "watch", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )


def end_watch(watch: subprocess.Popen[str], err: queue.Queue[str], seen_err: list[str]) -> str:
    """Ctrl-C, exit 0, and everything watch said on stderr."""
    watch.send_signal(signal.SIGINT)
    assert watch.wait(timeout=PATIENCE) == 0
    while True:  # the pump ends at EOF, now that watch has exited
        try:
            seen_err.append(err.get(timeout=5))
        except queue.Empty:
            break
    return "".join(seen_err)


def stop_watch(watch: subprocess.Popen[str]) -> None:
    """Kill it if it still runs, and close its pipes."""
    if watch.poll() is None:
        watch.kill()
    watch.wait()
    for stream in (watch.stdout, watch.stderr):
        if stream is not None:
            stream.close()
