"""`python -m ctxoffload`."""

import sys

from .cli import main

status = main()
# CPython remembers a KeyboardInterrupt that ended a string exec or eval (a namedtuple or a
# dataclass being made as Ctrl-C lands), even one a command caught, and under `python -m` then
# kills the process with SIGINT at exit instead of exiting with the status (watch ended by
# Ctrl-C: -2, not 0). A string eval that ends normally clears what it remembers.
eval("0")
sys.exit(status)
