"""Confinement: the read-back tools reach nothing outside their roots.

The policy of the file tools (Read, Grep, Glob), which take paths a model writes:

- a path resolves inside one of the roots (normally the workspace directory), with symlinks
  followed first, so `..` escapes, absolute paths elsewhere and links whose target lies
  outside are refused (`resolve_in_roots`);
- a file is opened first and the open descriptor checked after (`open_in_roots`): its real
  path lies inside the roots, it is a regular file (FIFOs, sockets and devices are skipped;
  `O_NONBLOCK` keeps opening a FIFO from waiting), and it has no second link. A file swapped
  for a symlink between the check and the open is therefore never read. The link check and
  its refusal reasons are the workspace's (`verify_settled`, `Refused`): a second link is
  looked at again for a moment, as every reader of the workspace does, because a
  tool_result file has two while the workspace links it into place;
- a file is read as every reader of the workspace reads it (`open_readable`): a
  context.jsonl ends with its last committed batch (`readable_end`), so Read and Grep never
  show a batch being written, or one a kill cut before its commit.

Unlike the workspace's own reads, links inside the roots are followed: a model may pass a
path through a link that stays inside.
"""

from __future__ import annotations

import errno
import fcntl
import io
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from .._disk.commit import readable_end
from .._disk.layout import is_committed_log
from .._disk.paths import hard_links_reason, verify_settled
from .._disk.read import Refused
from ..exceptions import ToolError
from ._arguments import quote

__all__ = [
    "NotRegular",
    "display_name",
    "exists_in_roots",
    "open_in_roots",
    "open_readable",
    "os_error_message",
    "real_roots",
    "resolve_in_roots",
]

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def resolve_in_roots(path: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]]) -> Path:
    """Resolve `path` and refuse it unless it lies inside one of `roots`.

    Relative paths resolve against the first root; a relative path that names nothing there
    but names a file inside a root when taken from the current directory is taken that way,
    because that is the form of the references a workspace with a relative workdir returns
    (`agent_workspace/sessions/...`). Symlinks (in the path and in the roots)
    are followed before the check, so a link inside a root whose target is outside is
    refused like an absolute path outside.

    Args:
        path: the path asked for, relative or absolute; it need not exist.
        roots: the directories that may be read; at least one.

    Returns:
        The real path (symlinks resolved), inside one of the roots.

    Raises:
        ToolError: `roots` is empty, `path` contains a NUL byte or cannot be resolved, or it
            resolves outside every root.
    """
    if not roots:
        raise ToolError("no roots were given: pass at least one directory the tools may read")
    raw = os.fspath(path)
    if "\0" in raw:
        raise ToolError(f"path {quote(raw)} contains a NUL byte: pass a plain file path")
    resolved_roots = real_roots(roots)
    relative = [resolved_roots[0] / raw, Path.cwd() / raw]
    candidates = [Path(raw)] if os.path.isabs(raw) else relative
    inside: list[Path] = []
    real = Path(raw)
    for index, candidate in enumerate(candidates):
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop on Python 3.10
            raise ToolError(
                f"path {quote(raw)} cannot be resolved ({exc}): pass another path"
            ) from exc
        if index == 0:
            real = resolved
        if _inside(resolved, resolved_roots):
            inside.append(resolved)
    if inside:
        return next((p for p in inside if p.exists()), inside[0])
    allowed = ", ".join(str(root) for root in resolved_roots)
    raise ToolError(
        f"path {quote(raw)} resolves to {quote(str(real))}, which is outside the allowed roots "
        f"({allowed}): pass a path inside them; relative paths start at {resolved_roots[0]}"
    )


def real_roots(roots: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The roots with their symlinks resolved.

    Resolve them per call, not once: a workspace directory may be created after the tools
    that read it (LocalWorkspace creates it lazily).
    """
    return [Path(root).resolve() for root in roots]


def exists_in_roots(path: str, roots: list[Path]) -> bool:
    """Whether `path` names an existing entry inside the roots."""
    try:
        return resolve_in_roots(path, roots).exists()
    except ToolError:
        return False


def display_name(path: Path, roots: list[Path]) -> str:
    """How a path is shown: relative to the first root when inside it (how the tools resolve
    a relative path), else absolute."""
    if path == roots[0]:
        return "."
    if path.is_relative_to(roots[0]):
        return path.relative_to(roots[0]).as_posix()
    return str(path)


class NotRegular(ToolError):
    """The path names a FIFO, socket or device: skipped in a search, an error in Read."""


def open_in_roots(shown: str, path: Path, roots: list[Path]) -> int:
    """Open `path` (resolved inside `roots`) for reading, check the open descriptor, return it.

    The checks run on what was opened, not on the name, so a file swapped for a symlink (or
    a hard link) to an outside file between a check and the open is refused: the descriptor
    must be a regular file, with no second link (one looked at again for up to 20 ms),
    whose real path (from /proc/self/fd) lies inside `roots` (where /proc is missing: the
    same device and inode as the resolved name, no symlink). `O_NONBLOCK` makes opening a
    FIFO return at once; it is cleared afterwards.

    Args:
        shown: the path as the model wrote it, named in errors.
        path: the path `resolve_in_roots` returned.
        roots: the real roots.

    Returns:
        The open descriptor, blocking; the caller closes it.

    Raises:
        NotRegular: a FIFO, socket or device.
        ToolError: the file is missing, unreadable, a directory, outside or hard-linked;
            with no descriptors left, a message saying so.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise ToolError(f"no such file: {quote(shown)}; call Glob to find the right path") from None
    except OSError as exc:
        raise ToolError(os_error_message(f"cannot open {quote(shown)}", exc)) from exc
    try:
        _check_descriptor(fd, shown, path, roots)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_descriptor(fd: int, shown: str, path: Path, roots: list[Path]) -> None:
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        raise ToolError(f"{quote(shown)} is a directory: call Glob with '{shown}/*' to list it")
    try:
        status = verify_settled(fd, shown)
    except Refused as refused:
        if refused.reason == "hard_links":
            raise ToolError(
                f"{quote(shown)} {hard_links_reason(refused.links)}; it is not read"
            ) from None
        raise NotRegular(
            f"{quote(shown)} is not a regular file (a pipe, socket or device): it is skipped"
        ) from None
    if not _descriptor_inside(fd, status, path, roots):
        raise ToolError(
            f"{quote(shown)} changed while it was opened and now lies outside the allowed "
            f"roots: it was not read"
        )


def _descriptor_inside(fd: int, status: os.stat_result, path: Path, roots: list[Path]) -> bool:
    try:
        real = Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        # No /proc: the name must still be the same file, reached without a symlink at its end.
        try:
            named = os.stat(path, follow_symlinks=False)
        except OSError:
            return False
        same = (named.st_dev, named.st_ino) == (status.st_dev, status.st_ino)
        return same and _inside(path, roots)
    return _inside(real, roots)


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def os_error_message(what: str, exc: OSError) -> str:
    """`what: reason`; running out of descriptors says so, and that nothing was read or searched."""
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return (
            f"{what}: no file descriptors are left in this process ({exc.strerror}); nothing "
            f"was read or searched: try again when fewer files are open"
        )
    return f"{what}: {exc.strerror or exc}"


def open_readable(shown: str, path: Path, roots: list[Path]) -> IO[bytes]:
    """`open_in_roots`, as a binary file that ends where every reader of the workspace stops
    (`readable_end`): a context.jsonl with its last committed batch, any other file where it
    ends. Seeking to the end gives that length.

    Raises:
        NotRegular, ToolError: as `open_in_roots`.
    """
    fd = open_in_roots(shown, path, roots)
    try:
        size = os.fstat(fd).st_size
        end = _readable_end(fd, shown, path, size)
    except BaseException:
        os.close(fd)
        raise
    if end >= size:
        return os.fdopen(fd, "rb")
    return io.BufferedReader(_Prefix(fd, end))


def _readable_end(fd: int, shown: str, path: Path, size: int) -> int:
    if not is_committed_log(path.name):
        return size  # no record to look for: no folder to open
    # Were the folder swapped meanwhile, a record found there is still checked against this
    # file's own bytes (`commit_mismatch`): at worst lines are hidden, never shown from elsewhere.
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return size
    try:
        return readable_end(dir_fd, path.name, shown, fd, size)
    finally:
        os.close(dir_fd)


class _Prefix(io.RawIOBase):
    """The first `end` bytes of an open file, read with `pread`; closing it closes the file."""

    def __init__(self, fd: int, end: int) -> None:
        super().__init__()
        self._fd = fd
        self._end = end
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._position, os.SEEK_END: self._end}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        wanted = min(len(buffer), self._end - self._position)
        if wanted <= 0:
            return 0
        data = os.pread(self._fd, wanted, self._position)
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self._fd)
            finally:
                super().close()
