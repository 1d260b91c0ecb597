"""A bucket workspace's configuration checked before any request: the URL (a bucket, no
credentials in it), and this host's name for writer ids."""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from ..exceptions import ConfigError

__all__ = [
    "BUCKET_SCHEMES",
    "checked_url",
    "host_name",
    "refuse_userinfo",
    "refuse_userinfo_in_environment",
]


def host_name() -> str:
    """This machine's name as a writer id may hold it (at most 40 plain characters)."""
    try:
        return re.sub(r"[^A-Za-z0-9_.-]", "_", os.uname().nodename)[:40] or "host"
    except AttributeError:  # pragma: no cover - not on POSIX
        return "host"


# The URLs accepted, by scheme: a bucket (or container) and an optional prefix, or memory.
BUCKET_SCHEMES = ("s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl")
_ACCEPTED = (
    "use s3://BUCKET/PREFIX (also s3a://), gs://BUCKET/PREFIX, az://CONTAINER/PREFIX (also "
    "azure://, abfs://, abfss://, adl://) or memory:// (a store in this process, for tests); "
    "for a folder on disk use LocalWorkspace"
)
# The environment variables each cloud's client reads (obstore reads every one of them).
_ENVIRONMENT_PREFIXES = {
    "s3": "AWS_",
    "s3a": "AWS_",
    "gs": "GOOGLE_",
    "az": "AZURE_",
    "azure": "AZURE_",
    "abfs": "AZURE_",
    "abfss": "AZURE_",
    "adl": "AZURE_",
}


def checked_url(url: str) -> str:
    """`url` in its one spelling (scheme lower-cased, no trailing slash).

    Raises:
        ConfigError: not a bucket URL this workspace takes, or one holding credentials.
    """
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(f"object store url {url!r} is not a URL: {_ACCEPTED}")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if "@" in parts.netloc:
        raise ConfigError(
            "object store url holds credentials (user:secret@...): pass them as arguments "
            "or environment variables, never in the URL"
        )
    if parts.query or parts.fragment:
        raise ConfigError(
            f"object store url {parts.scheme}://{parts.netloc}{parts.path} has a query or "
            "fragment: pass options as arguments"
        )
    if scheme == "memory":
        if parts.netloc:
            raise ConfigError(
                f"object store url {url!r} is not accepted: memory:// takes no bucket "
                f"(memory://, or memory:///PREFIX); {_ACCEPTED}"
            )
    elif scheme not in BUCKET_SCHEMES:
        raise ConfigError(f"object store url {url!r} is not accepted: {_ACCEPTED}")
    elif not parts.netloc or ":" in parts.netloc:
        raise ConfigError(
            f"object store url {url!r} names no bucket (or names a port): {_ACCEPTED}"
        )
    path = parts.path.rstrip("/")
    if any(p in ("", ".", "..") for p in path.split("/")[1:]):
        raise ConfigError(f"object store url {url!r} has an empty, '.' or '..' path component")
    return f"{scheme}://{parts.netloc}{path}"


def _has_userinfo(value: object) -> bool:
    """Whether `value` is a URL with a user (and maybe a password) before its host."""
    if not isinstance(value, str) or "://" not in value:
        return False
    try:
        return "@" in urlsplit(value.strip()).netloc
    except ValueError:
        return True  # not parseable: refuse rather than risk quoting it


def refuse_userinfo(name: str, value: object) -> None:
    """Refuse an option `name` whose URL holds credentials (`ConfigError`)."""
    if _has_userinfo(value):
        raise ConfigError(
            f"{name} holds credentials in its URL (user:secret@...): give the URL without "
            "them, and the credentials as arguments or environment variables"
        )


def refuse_userinfo_in_environment(url: str) -> None:
    """Refuse an endpoint variable with a password, as `endpoint_url=` is refused.

    obstore reads the cloud's variables itself and quotes the endpoint, password included,
    in its error messages; so the variable is named here, never its value.
    """
    prefix = _ENVIRONMENT_PREFIXES.get(url.split("://", 1)[0])
    if prefix is None:
        return
    for name, value in sorted(os.environ.items()):
        if name.upper().startswith(prefix) and _has_userinfo(value):
            raise ConfigError(
                f"the environment variable {name} holds credentials in its URL "
                "(user:secret@...): set it to the URL without them, and give the credentials "
                f"in {prefix}ACCESS_KEY_ID / {prefix}SECRET_ACCESS_KEY or as arguments"
                if prefix == "AWS_"
                else f"the environment variable {name} holds credentials in its URL "
                "(user:secret@...): set it to the URL without them, and give the "
                "credentials as arguments or in their own variables"
            )
