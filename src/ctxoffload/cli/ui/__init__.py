"""`ctxoffload ui`: the local viewer. `_server` registers the command, serves the page from
`static/` and answers its requests; `_model` builds what the page shows."""

from ._server import register

__all__ = ["register"]
