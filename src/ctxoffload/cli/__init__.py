"""The `ctxoffload` command."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the `ctxoffload` command line."""
    print("ctxoffload: the command line is not built yet", file=sys.stderr)
    return 2
