"""What the eval tests share besides fixtures: the demo's session name and a way to run the
`ctxoffload` command in this process."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass

from ctxoffload.cli import main

DEMO_SESSION = "nightly-job"


@dataclass
class Ran:
    """One `ctxoffload` command run in this process: its exit status and what it printed."""

    code: int
    out: str
    err: str


def run_cli(*argv: str) -> Ran:
    """Run `ctxoffload ARGV...` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return Ran(code, out.getvalue(), err.getvalue())
