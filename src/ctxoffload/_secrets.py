"""Secrets kept out of everything ctxoffload prints or records: the one masking rule for every
command line and URL it shows (the MCP proxy's wrapped command or URL, a database URL, an
object store's endpoint and its error messages).

What counts as a secret, wherever it is written:

- the user part of a URL (`https://user:pw@host`, `https://TOKEN@host`): masked whole, since
  a user name is often the token itself;
- a value whose name looks secret (`is_secret_name`: key, token, secret, password, auth,
  credential, signature, sig, ...), assigned with `=` (a query parameter `?api_key=X`, an
  option `--api-key=X`, an environment-style argument `API_KEY=X`, libpq's `password=X`),
  or, in a command line, given as the next argument (`--api-key X`) or as a header
  (`X-Api-Key: X`);
- a bearer token (`Bearer X`) and whatever follows `Authorization:`;
- `-p X` / `-pX` only for the programs whose `-p` is a password (`_PASSWORD_FLAGS`): elsewhere
  `-p` is a port or a path.

A command or URL's secrets are found once (`Secrets.of_command`, `Secrets.of_url`) and masked
wherever they appear again, in any spelling a library may quote them in (percent-encoded or
not): an error message of an HTTP client quotes the URL it fetched, libpq quotes the part of a
URL it could not read. Text is masked by the patterns above as well, so a secret nobody
declared is masked where its name gives it away.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["MASK", "Secrets", "is_secret_name", "masked_command", "masked_url"]

MASK = "***"
"""What a secret is replaced by."""

# A name is secret when it holds one of these (case and separators aside): `apiKey`,
# `X-Amz-Security-Token`, `client_secret`, `PGPASSWORD`, `passwd`, `--auth-token`.
_SECRET_WORDS = (
    "key",
    "token",
    "secret",
    "passw",
    "pwd",
    "auth",
    "credential",
    "signature",
    "cookie",
    "sas",
)
# ... or is one of these words whole (as a part between separators): `--pass`, `sig=`.
_SECRET_PARTS = frozenset({"pass", "pw", "sig", "pin", "otp"})
_NAME_PARTS = re.compile(r"[^a-z0-9]+")

# Each pattern starts only where a name starts (the look-behind), so a long run of name
# characters is scanned once, not once per character.
# The user part of a URL (`scheme://userinfo@`): up to its last `@` before the path, as a URL
# parser reads it (a password with an `@` left unencoded is still all masked).
_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://(?P<secret>[^/\s?#'\"<>]+)@")
# `name=value`: a query parameter, an option, an environment variable, a conninfo field.
_ASSIGNED = re.compile(r"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z0-9_.-]+)=(?P<secret>[^\s&;'\"<>]+)")
# `--name=value`, `NAME=value` as a whole argument: the value is all the rest, spaces included.
_OPTION = re.compile(r"-{0,2}(?P<name>[A-Za-z0-9_.-]+)=(?P<secret>.+)", re.DOTALL)
# `name: value` as a whole argument (a header given to a client: `X-Api-Key: abc`).
_HEADER = re.compile(r"\s*(?P<name>[A-Za-z0-9_.-]+)\s*:\s*(?P<secret>\S.*)", re.DOTALL)
_AUTHORIZATION = re.compile(
    r"(?i)authorization['\"]?\s*[:=]\s*['\"]?(?:(?:bearer|basic|digest|token)\s+)?"
    r"(?P<secret>[^\s'\",;]+)"
)
_BEARER = re.compile(r"(?i)\bbearer\s+(?P<secret>[^\s'\",;]+)")

_PASSWORD_FLAGS: dict[str, tuple[str, bool]] = {
    # program: (its password flag, whether the value may be the next argument; mysql's
    # `-p db` prompts for the password and names a database)
    "mysql": ("-p", False),
    "mysqldump": ("-p", False),
    "mysqladmin": ("-p", False),
    "mysqlimport": ("-p", False),
    "mysqlshow": ("-p", False),
    "mysqlcheck": ("-p", False),
    "mariadb": ("-p", False),
    "mariadb-dump": ("-p", False),
    "mariadb-admin": ("-p", False),
    "sshpass": ("-p", True),
    "redis-cli": ("-a", True),
}

_SHORTEST_ANYWHERE = 4
"""A known secret shorter than this is masked where a pattern finds it, not wherever the same
characters appear (a password `1` would turn every `1` of a message into `***`)."""


def is_secret_name(name: str) -> bool:
    """Whether an option, parameter or variable called `name` holds a secret.

    Generous on purpose: masking a value that was not secret costs a reader one value;
    showing one that was costs the secret.
    """
    lowered = name.lower()
    if any(word in lowered for word in _SECRET_WORDS):
        return True
    return any(part in _SECRET_PARTS for part in _NAME_PARTS.split(lowered))


def _spans(text: str, *, argument: bool = False) -> list[tuple[int, int]]:
    """Where the patterns find secrets in `text` (start, end), in order, not overlapping."""
    found: list[tuple[int, int]] = []
    for match in _USERINFO.finditer(text):
        found.append(match.span("secret"))
    for match in _ASSIGNED.finditer(text):
        if is_secret_name(match.group("name")):
            found.append(match.span("secret"))
    for pattern in (_AUTHORIZATION, _BEARER):
        found.extend(match.span("secret") for match in pattern.finditer(text))
    if argument:
        option = _OPTION.fullmatch(text)
        if option is not None and is_secret_name(option.group("name")):
            found.append(option.span("secret"))
        header = _HEADER.match(text)
        if header is not None and is_secret_name(header.group("name")):
            found.append(header.span("secret"))
    found.sort()
    merged: list[tuple[int, int]] = []
    for start, end in found:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _replace(text: str, spans: Iterable[tuple[int, int]]) -> str:
    out: list[str] = []
    at = 0
    for start, end in spans:
        out.append(text[at:start])
        out.append(MASK)
        at = end
    out.append(text[at:])
    return "".join(out)


def _spellings(secret: str) -> set[str]:
    """A secret as a message may quote it: as written, percent-decoded or percent-encoded
    (a URL), shell-quoted (a command line), escaped as Python's `repr` or JSON escape it."""
    decoded = urllib.parse.unquote(secret)
    found = {secret, decoded, urllib.parse.quote(decoded, safe=""), urllib.parse.quote(decoded)}
    for value in (secret, decoded):
        found.update((shlex.quote(value), repr(value)[1:-1], json.dumps(value)[1:-1]))
    return found


@dataclass(frozen=True)
class Secrets:
    """The secrets a command line or URL holds, and how to keep them out of a text.

    Args:
        values: the secrets, as written.
    """

    values: tuple[str, ...] = ()

    @classmethod
    def of_url(cls, url: str) -> Secrets:
        """The secrets of a URL: its user part (and the password in it alone) and the
        values of its parameters whose names look secret."""
        return cls(tuple(_found_in(url)))

    @classmethod
    def of_command(cls, argv: Sequence[str]) -> Secrets:
        """The secrets of a command line (see the module's docstring)."""
        found: list[str] = []
        program: tuple[str, bool] | None = None
        previous: str | None = None
        for arg in argv:
            found.extend(_found_in(arg, argument=True))
            if previous is not None and arg and not arg.startswith("-"):
                separate = program is not None and program[1] and previous == program[0]
                if separate or _is_secret_flag(previous):
                    found.append(arg)
            if program is not None:
                flag = program[0]
                if arg.startswith(flag) and len(arg) > len(flag) and not arg.startswith("--"):
                    found.append(arg[len(flag) :])
            name = os.path.basename(arg).removesuffix(".exe").lower()
            if name in _PASSWORD_FLAGS:
                program = _PASSWORD_FLAGS[name]
            previous = arg
        return cls(tuple(dict.fromkeys(found)))

    def mask(self, text: str) -> str:
        """`text` with every secret replaced by `***`: the known ones in each spelling, and
        whatever the patterns find."""
        for secret in sorted(self._anywhere(), key=len, reverse=True):
            text = text.replace(secret, MASK)
        return _replace(text, _spans(text))

    def mask_argument(self, arg: str) -> str:
        """One argument of the command line for people: a known secret given alone is
        `***` whatever its length; inside an argument, masked as in `mask`."""
        if arg in self.values:
            return MASK
        for secret in sorted(self._anywhere(), key=len, reverse=True):
            arg = arg.replace(secret, MASK)
        return _replace(arg, _spans(arg, argument=True))

    def _anywhere(self) -> set[str]:
        return {
            spelling
            for secret in self.values
            for spelling in _spellings(secret)
            if len(spelling) >= _SHORTEST_ANYWHERE
        }


def _found_in(text: str, *, argument: bool = False) -> list[str]:
    """The secrets the patterns find in `text`; of a user part, the password alone too."""
    found: list[str] = []
    for start, end in _spans(text, argument=argument):
        secret = text[start:end]
        found.append(secret)
        _, colon, password = secret.partition(":")
        if colon and password and "://" in text[:start]:
            found.append(password)
    return found


def _is_secret_flag(arg: str) -> bool:
    """Whether `arg` is an option (`--api-key`, `-token`) whose value is the next argument."""
    return arg.startswith("-") and "=" not in arg and is_secret_name(arg.lstrip("-"))


def masked_command(argv: Sequence[str]) -> str:
    """A command line for people (shell-quoted), its secrets masked."""
    secrets = Secrets.of_command(argv)
    return shlex.join(secrets.mask_argument(arg) for arg in argv)


def masked_url(url: str, text: str | None = None) -> str:
    """`text` (default: `url` itself) for a message, every secret `url` holds masked."""
    return Secrets.of_url(url).mask(url if text is None else text)
