"""What a door is given, checked at construction: one `ConfigError` naming the fix, before
the host's first call, never an `AttributeError` from inside the host's run."""

from __future__ import annotations

import functools
import inspect
import os
from typing import Any, TypeVar

from ..compression import ContextConfig
from ..exceptions import ConfigError
from ..workspace import LocalWorkspace, Offloader, Workspace
from .doors import Door

__all__ = [
    "arguments_checked",
    "checked_config",
    "checked_offloader",
    "checked_positive",
    "checked_workspace",
    "not_a_capability",
]

_OFFLOADER_METHODS = ("offload_context", "offload_tool_result", "offload_data_block")
_BACKENDS = (
    "LocalWorkspace(path), ObjectStoreWorkspace(url), SqlWorkspace(url) or InMemoryWorkspace()"
)


def checked_workspace(
    workspace: object, door: Door, *, role: str = "workspace", adapter: str | None = None
) -> Workspace:
    """`workspace` when it is a whole `Workspace` that can be written (`adapter`: the class
    the user built, when the door has several, as its refusal names it; the door's own
    adapter by default).

    Raises:
        ConfigError: a path (str or os.PathLike) where a workspace belongs, an object that is
            no `Workspace`, or a `LocalWorkspace` whose workdir is an existing file.
    """
    _refuse_a_path(workspace, adapter or door.adapter, role)
    if not isinstance(workspace, Workspace):
        raise not_a_capability(workspace, Workspace, role=role, fix=f"pass {_BACKENDS}")
    _refuse_a_file(workspace)
    return workspace


def checked_offloader(offloader: object, door: Door, *, role: str = "workspace") -> Offloader:
    """`checked_workspace` for a door that needs only an `Offloader` (a custom one may do,
    if its three methods are `async def`: a door awaits them).

    Raises:
        ConfigError: a path, no `Offloader`, a sync method, or a workdir that is a file.
    """
    _refuse_a_path(offloader, door.adapter, role)
    if not isinstance(offloader, Offloader):
        raise not_a_capability(
            offloader,
            Offloader,
            role=role,
            fix=f"pass {_BACKENDS}, or an object with async {', '.join(_OFFLOADER_METHODS)}",
        )
    for name in _OFFLOADER_METHODS:
        if not inspect.iscoroutinefunction(getattr(offloader, name)):
            raise ConfigError(
                f"{role} {type(offloader).__name__}.{name} is not async: define it with "
                f"'async def {name}(...)' ({door.adapter} awaits it; a sync one would leave "
                "big results in the context)"
            )
    _refuse_a_file(offloader)
    return offloader


def checked_config(config: object) -> ContextConfig:
    """The door's `ContextConfig`: the one given, or the default for None.

    Raises:
        ConfigError: anything else (a dict, a pipeline, a window given as a number).
    """
    if config is None:
        return ContextConfig()
    if not isinstance(config, ContextConfig):
        raise ConfigError(
            f"config is a {type(config).__name__}, not a ContextConfig: pass "
            "config=ContextConfig(context_window=..., tool_result_limit=...)"
        )
    return config


def checked_positive(value: object, name: str) -> int:
    """An argument that must be a positive int (`max_output_chars`, ...).

    Raises:
        ConfigError: it is not.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} {value!r} is not a positive int: pass {name}=20000 or more")
    return value


def _refuse_a_path(given: object, adapter: str, role: str) -> None:
    """A path or URL given where a workspace belongs: refused, naming the class that takes
    what it is (a database URL `SqlWorkspace`, a bucket URL `ObjectStoreWorkspace`, anything
    else `LocalWorkspace`), the URL's secrets masked by the one rule (`masked_url`)."""
    if not isinstance(given, (str, bytes, os.PathLike)):
        return
    path = os.fsdecode(given)
    scheme, sep, _ = path.partition("://")
    if sep and scheme.isascii() and scheme.replace("+", "").replace("-", "").isalnum():
        from .._secrets import masked_url
        from ..workspace import ObjectStoreWorkspace, SqlWorkspace

        shown = masked_url(path)
        if scheme.lower() in SqlWorkspace.SCHEMES:
            what, fix = "database URL", "SqlWorkspace(<that URL>)"
        elif scheme.lower() in ObjectStoreWorkspace.SCHEMES:
            what, fix = "object store URL", "ObjectStoreWorkspace(<that URL>)"
        else:
            what, fix = "URL", _BACKENDS
        raise ConfigError(f"{adapter}: {role} is the {what} {shown!r}, not a workspace: pass {fix}")
    raise ConfigError(
        f"{adapter}: {role} is the path {path!r}, not a workspace: pass "
        f"LocalWorkspace({path!r}) instead (ObjectStoreWorkspace or SqlWorkspace for a "
        "bucket or a database)"
    )


def _refuse_a_file(workspace: Any) -> None:
    """A `LocalWorkspace` whose workdir is something other than a folder (a file, a FIFO) would
    fail every write: said now. A missing workdir is made on first use."""
    if not isinstance(workspace, LocalWorkspace):
        return
    try:
        mode = os.stat(workspace.workdir).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(
            f"workdir {str(workspace.workdir)!r} cannot be reached ({exc.strerror}): give the "
            "workspace a folder this process can write"
        ) from None
    import stat

    if not stat.S_ISDIR(mode):
        raise ConfigError(
            f"workdir {str(workspace.workdir)!r} is a file, not a folder: give the workspace "
            "a folder as its workdir (a missing one is made)"
        )


def not_a_capability(obj: object, protocol: type, *, role: str, fix: str) -> ConfigError:
    """The error that refuses `obj` after `isinstance(obj, protocol)` said no.

    The one refusal of "not a workspace (an offloader, a reference reader...)" for code that
    takes one from a user: `isinstance` says only yes or no, where the user needs to know
    which methods to add, and every caller refuses with the same error class. The caller
    raises it, so that the type checker sees the `isinstance` narrow:

        if not isinstance(workspace, Offloader):
            raise not_a_capability(workspace, Offloader, role="workspace", fix="pass ...")

    Args:
        obj: what the user passed.
        protocol: `Offloader`, `Workspace` or another protocol of `ctxoffload.workspace`.
        role: what `obj` was passed as, for the message (`offloader`, `workspace`).
        fix: what to pass instead, the end of the message.
    """
    declared = _methods(protocol)
    missing = [name for name in declared if not callable(getattr(obj, name, None))]
    # None or a number is named as it is, anything else by its class.
    what = repr(obj) if obj is None or isinstance(obj, int | float) else type(obj).__name__
    if len(missing) == len(declared) > _LISTED:
        # Nothing of a workspace at all (None, a number, a string): a wall of sixteen method
        # names would hide the one thing to read, what to pass instead.
        lacking = (
            f"no method of a ctxoffload {protocol.__name__} ({', '.join(missing[:_LISTED])} "
            f"and {len(missing) - _LISTED} more)"
        )
    else:
        lacking = f"no {', '.join(missing)}"
    return ConfigError(
        f"{role} {what} has {lacking}, so it is not a ctxoffload {protocol.__name__}: {fix}"
    )


_LISTED = 3
"""How many methods a refusal names when the object has none of them."""


def _methods(protocol: type) -> list[str]:
    """The methods of `protocol` (one of `ctxoffload.workspace`'s) in declared order: those
    of the protocols of its module it extends, then its own."""
    declared = [
        name
        # The protocols it extends first (Offloader's methods lead Workspace's), then its own.
        for cls in (*protocol.__mro__[1:], protocol)
        if cls.__module__ == protocol.__module__
        for name, value in vars(cls).items()
        if callable(value) and not name.startswith("_")
    ]
    return list(dict.fromkeys(declared))


_Door = TypeVar("_Door", bound=type)


def arguments_checked(cls: _Door) -> _Door:
    """A door's class whose constructor refuses a keyword it does not take with one
    `ConfigError` naming the fix, as a config dict is refused, never Python's bare
    `TypeError`: a setting of `ContextConfig` given to the door itself
    (`ContextOffloadPlugin(ws, tool_result_limit=3000)`) names
    `config=ContextConfig(tool_result_limit=3000)`; any other names what it takes.

    Every door's class is built with it (the conformance suite holds each to it). A class
    whose constructor hands the other keywords to its host's model (LlamaIndex's `Memory`, a
    pydantic model) takes that model's fields too; one that hands any keyword on to code of
    no declared fields is left as it is.
    """
    init = vars(cls).get("__init__") or cls.__init__  # type: ignore[misc]
    parameters = list(inspect.signature(init).parameters.values())[1:]
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    takes = [p.name for p in parameters if p.kind in named]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        fields = getattr(cls, "model_fields", None)
        if not isinstance(fields, dict):
            return cls
        takes += [name for name in fields if name not in takes]

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        unknown = [name for name in kwargs if name not in takes]
        if unknown:
            raise ConfigError(_not_taken(cls.__name__, unknown[0], kwargs[unknown[0]], takes))
        init(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[misc]
    return cls


def _not_taken(adapter: str, name: str, value: object, takes: list[str]) -> str:
    """What a door says of a keyword its constructor does not take."""
    config = next((t for t in takes if t.endswith("config")), None)
    if config is not None and name in ContextConfig.model_fields:
        return (
            f"{adapter} takes no {name}: it is a setting of ContextConfig, pass "
            f"{config}=ContextConfig({name}={value!r})"
        )
    return f"{adapter} takes no argument {name!r}: it takes {', '.join(takes)}"
