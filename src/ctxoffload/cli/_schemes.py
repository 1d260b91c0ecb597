"""The --workdir URLs no command can read, refused in the command line's words."""

from __future__ import annotations

from ..exceptions import CliError

__all__ = ["check_scheme"]


def check_scheme(url: str) -> None:
    """Refuse, in the command line's words, a --workdir URL no command can read: a scheme no
    workspace takes (a typo: the known ones are named, the nearest first), or `memory://`,
    a store that lives only in the process that made it.

    Raises:
        CliError: either.
    """
    from .._secrets import masked_url

    scheme = url.partition("://")[0].lower()
    shown = masked_url(url)  # a password in a mistyped URL is never printed
    if scheme == "memory":
        raise CliError(
            f"--workdir {shown!r}: a memory:// store lives only in the process that made it, so "
            "no command can read it: give the folder, database or bucket the agents write to"
        )
    try:
        from ..workspace import ObjectStoreWorkspace, SqlWorkspace

        buckets, databases = ObjectStoreWorkspace.SCHEMES, SqlWorkspace.SCHEMES
    except ImportError:  # pragma: no cover - the workspace modules import nothing optional
        return
    if scheme in buckets:
        return
    import difflib

    near = difflib.get_close_matches(scheme, [*databases, *buckets], n=1)
    meant = f"{near[0]}://{shown.partition('://')[2]}" if near else None
    known = ", ".join(f"{name}://" for name in (*databases, *buckets) if name != "memory")
    raise CliError(
        f"--workdir {shown!r}: no workspace has the scheme {scheme!r}"
        + (f" (did you mean {meant!r}?)" if meant else "")
        + f": give a folder's path, or a URL of {known}"
    )
