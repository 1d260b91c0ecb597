"""Secrets kept out of everything ctxoffload prints or records: the one masking rule for every
command line and URL it shows (the MCP proxy's wrapped command or URL, a database URL, an
object store's endpoint and its error messages).

What counts as a secret, wherever it is written:

- the user part of a URL (`https://user:pw@host`, `https://TOKEN@host`): masked whole, since
  a user name is often the token itself;
- a value whose name looks secret (`is_secret_name`: key, token, secret, password, auth,
  credential, signature, sig, pat, ...), assigned with `=` (a query parameter `?api_key=X`,
  an option `--api-key=X`, an environment-style argument `API_KEY=X`, libpq's `password=X`,
  and such an assignment given as an option's value, docker's `--env=GITHUB_TOKEN=X`), as a
  quoted field of JSON or a Python dict (`--config '{"apiKey": "X"}'`), or, in a command
  line, given as the next argument (`--api-key X`) or as a header (`X-Api-Key: X`);
- a command line inside an argument (`sh -c 'exec server --token X'`) is read as one too;
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
# (`--pat`, `GITHUB_PAT`: a personal access token; `jwt`).
_SECRET_PARTS = frozenset({"pass", "pw", "sig", "pin", "otp", "pat", "jwt"})
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
# `"name": "value"` in JSON (`--config '{"apiKey": "X"}'`) or a Python dict's repr, a quoted
# value with its escapes.
_QUOTED_FIELD = re.compile(
    r"""(?P<q>["'])(?P<name>[A-Za-z0-9_.-]+)(?P=q)\s*:\s*"""
    r"""(?:"(?P<secret>(?:[^"\\]|\\.)*)"|'(?P<single>(?:[^'\\]|\\.)*)')"""
)

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
    _assigned(text, 0, len(text), found)
    for pattern in (_AUTHORIZATION, _BEARER):
        found.extend(match.span("secret") for match in pattern.finditer(text))
    for match in _QUOTED_FIELD.finditer(text):
        if is_secret_name(match.group("name")):
            group = "secret" if match.group("secret") is not None else "single"
            found.append(match.span(group))
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


def _assigned(text: str, start: int, end: int, found: list[tuple[int, int]]) -> None:
    """The values of `name=value` in `text[start:end]` whose names look secret, into `found`;
    a value that is itself `NAME=VALUE` is read again (`--env=GITHUB_TOKEN=X`, docker's
    spelling, names the option `env`: the token is the inner value), a few levels deep (each
    level scans the rest of the value again: `a=a=a=...` would otherwise cost its length
    squared)."""
    spans = [(start, end)]
    for _ in range(_NESTED_ASSIGNMENTS):
        inner: list[tuple[int, int]] = []
        for at, until in spans:
            for match in _ASSIGNED.finditer(text, at, until):
                if is_secret_name(match.group("name")):
                    found.append(match.span("secret"))
                else:
                    inner.append(match.span("secret"))
        if not inner:
            return
        spans = inner


_NESTED_ASSIGNMENTS = 4
"""How deep `name=NAME=value` is read (docker's `--env=NAME=VALUE` is two)."""


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
    def of_command(cls, argv: Sequence[str], *, _depth: int = 0) -> Secrets:
        """The secrets of a command line (see the module's docstring), and of the command
        lines inside its arguments (`sh -c 'exec server --token X'`, `ssh host 'cmd ...'`)."""
        found: list[str] = []
        program: tuple[str, bool] | None = None
        previous: str | None = None
        for arg in argv:
            found.extend(_found_in(arg, argument=True))
            words = _words(arg) if _depth < _NESTED_COMMANDS else None
            if words is not None:
                found.extend(cls.of_command(words, _depth=_depth + 1).values)
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
        words = _words(arg)
        if words is not None:
            inner = Secrets.of_command(words)
            if inner.values:
                # A command line inside the argument: shown as its words, each masked as an
                # argument, so that a short secret (`--token X`) is masked too.
                both = Secrets((*self.values, *inner.values))
                return " ".join(_quoted(both.mask_argument(word)) for word in words)
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


_NESTED_COMMANDS = 3
"""How deep command lines inside arguments are read (`sh -c "ssh host 'cmd --token X'"`)."""


def _words(arg: str) -> list[str] | None:
    """The words of an argument that is itself a command line (it holds whitespace and more
    than one word), as a shell splits it (on whitespace where its quotes do not close)."""
    if not any(char.isspace() for char in arg):
        return None
    try:
        words = shlex.split(arg)
    except ValueError:
        words = arg.split()
    return words if len(words) > 1 else None


def _quoted(word: str) -> str:
    """`word` shell-quoted for a command line inside an argument, a mask left bare (the
    argument is quoted as a whole already: `'exec server --token ***'`)."""
    if shlex.quote(word.replace(MASK, "x")) == word.replace(MASK, "x"):
        return word
    return shlex.quote(word)


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
