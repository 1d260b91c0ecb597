"""Every exception ctxoffload raises::

    CtxOffloadError
    ├── InvalidSessionId        a session id that is not a plain name (raised before any I/O)
    ├── InvalidReference        a reference that is unknown or points outside the workspace
    ├── InvalidContent          input that cannot be offloaded faithfully (malformed base64, ...)
    ├── OffloadError            the workspace could not persist content (disk full, permissions)
    ├── TokenizerUnavailable    an exact tokenizer was asked for but cannot be loaded offline
    ├── ConfigError             an impossible configuration value
    │   └── PinError            a pin refused: an unknown message, or pins over their share
    ├── ModelError              a chat model call failed
    │   └── ContextOverflowError   the prompt is larger than the context window (the provider
    │                              said so, or ctxoffload refused to send it)
    ├── SummaryError            no valid summary could be produced by the summary model
    ├── IncompleteRecord        a record that cannot rebuild a step (a message never recorded)
    ├── SessionBusyError        another live writer holds the session's lease
    ├── ToolError               a tool refused or failed (a path outside the roots, a sub-agent)
    └── CliError                a `ctxoffload` command stopped: one line on stderr, its exit status

Messages say what was wrong, with the offending value, and what to do about it.
"""

from __future__ import annotations

__all__ = [
    "CliError",
    "ConfigError",
    "ContextOverflowError",
    "CtxOffloadError",
    "IncompleteRecord",
    "InvalidContent",
    "InvalidReference",
    "InvalidSessionId",
    "ModelError",
    "OffloadError",
    "PinError",
    "SessionBusyError",
    "SummaryError",
    "TokenizerUnavailable",
    "ToolError",
]


class CtxOffloadError(Exception):
    """Base class of every error raised by ctxoffload."""


class InvalidSessionId(CtxOffloadError, ValueError):
    """A session id is not a plain name; nothing was read or written."""


class InvalidReference(CtxOffloadError, ValueError):
    """A reference is unknown to the workspace or points outside it."""


class InvalidContent(CtxOffloadError, ValueError):
    """Content cannot be offloaded faithfully, for example malformed base64."""


class OffloadError(CtxOffloadError, OSError):
    """The workspace could not persist content; nothing half-written is left visible.

    Attributes:
        path: the file that could not be written.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class TokenizerUnavailable(CtxOffloadError):
    """An exact tokenizer cannot be loaded without the network."""


class ConfigError(CtxOffloadError, ValueError):
    """A configuration value is impossible."""


class PinError(ConfigError):
    """A pin was refused: the message is not in the context, or the pins would take more
    than their share of the window (`ContextConfig.pin_ratio`); nothing was pinned."""


class ModelError(CtxOffloadError):
    """A chat model call failed."""


class ContextOverflowError(ModelError):
    """The prompt exceeds the context window: the provider said so, or ctxoffload refused to
    send it (`ContextConfig(over_window="refuse")`).

    Attributes:
        messages: when ctxoffload refused the request, the context as its managers left it
            (`Msg` objects; a compaction made before the refusal is in it): what to go on
            with. None when the provider reported the overflow.
    """

    # `object`, not `Msg`: this module imports nothing (not even typing), so that every other
    # module can import it.
    def __init__(self, *args: object, messages: list[object] | None = None) -> None:
        super().__init__(*args)
        self.messages = messages


class SummaryError(CtxOffloadError):
    """The summary model did not produce a valid summary."""


class IncompleteRecord(CtxOffloadError, LookupError):
    """A session's record cannot rebuild a step: a message that step was sent is not in it."""


class SessionBusyError(CtxOffloadError):
    """Another live writer holds the session's lease (see "Agents together" in the docs).

    Attributes:
        session_id: the session asked for.
        holder: what the lease file or object says of its holder (pid, host, agent,
            started, and for a bucket ttl), as far as it could be read.
    """

    def __init__(self, message: str, session_id: str, holder: dict[str, object]) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.holder = holder


class ToolError(CtxOffloadError):
    """A tool refused a request or failed: a workspace file tool, or a sub-agent (the
    message names its session and the files it stored)."""


class CliError(CtxOffloadError):
    """A `ctxoffload` command stopped: the message is printed as one line on stderr.

    Attributes:
        code: the exit status to return (2: usage or input error, 1: problems found).
    """

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
