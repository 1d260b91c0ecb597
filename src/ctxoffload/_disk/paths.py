"""The no-follow path layer: every entry inside the workspace is reached without following links.

The workdir is resolved once, when the workspace is made (it may itself be a symlink). Below
it, each directory is opened relative to its parent's descriptor with `O_NOFOLLOW |
O_DIRECTORY`, and each file with `O_NOFOLLOW | O_NONBLOCK`, so a symlink planted anywhere
inside cannot send a read or a write elsewhere: it is refused with an `OffloadError` naming
it. Files are checked on the open descriptor (a regular file with no second link) before a
byte is read or written, so there is no gap between the check and the use; `O_NONBLOCK` makes
opening a FIFO return at once instead of waiting for a writer.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Callable, Iterator, Sequence

from ..exceptions import OffloadError
from .layout import TEMPORARY_PREFIX, temporary_name

__all__ = [
    "DIR_FLAGS",
    "LOG_FLAGS",
    "READ_FLAGS",
    "WRITE_NEW_FLAGS",
    "Refused",
    "check_entry",
    "file_to_link",
    "file_url_to_path",
    "folder_in",
    "hard_linked",
    "hard_links_reason",
    "linked_elsewhere",
    "open_dir",
    "open_file",
    "open_for_reading",
    "open_for_reading_stat",
    "open_path",
    "open_tree",
    "path_to_file_url",
    "remove_dead_temporaries",
    "remove_tree",
    "replace_file",
    "same_entry",
    "temporary_file",
    "tree_size",
    "tree_usage",
    "unlink_quietly",
    "verify_file",
    "verify_settled",
    "workdir_problem",
    "write_new_file",
]

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
LOG_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
WRITE_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

# open() with O_NOFOLLOW on a symlink fails with ELOOP; O_DIRECTORY on anything that is not a
# directory (a file, or a symlink on some kernels) with ENOTDIR.
_PLANTED = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)
# Where a tool_result file cannot be made without a name (`file_to_link`), it has two links
# for the microseconds between being linked into place and its temporary name being removed:
# a second link is looked at again this often, 1 ms apart, before it is refused.
_LINK_RETRIES = 20


class Refused(OffloadError):
    """An entry the workspace never reads through: a link, a special file, a hard link.

    Attributes:
        path: the entry, as shown to people.
        reason: `"link"` (a symbolic link, or not a folder where one was expected),
            `"special"` (a FIFO, socket, device or folder where a file was expected) or
            `"hard_links"` (a file with other names, one of which may be outside).
        links: the file's link count, for `"hard_links"`.
    """

    def __init__(self, message: str, path: str, reason: str, links: int = 1) -> None:
        super().__init__(message, path)
        self.reason = reason
        self.links = links


def _planted(shown: str, exc: OSError, kind: str) -> Refused:
    error = Refused(
        f"{shown} is a symbolic link or not a {kind}: the workspace follows no link inside "
        "its workdir; remove that entry",
        shown,
        "link",
    )
    error.__cause__ = exc
    return error


def _special(shown: str) -> Refused:
    return Refused(
        f"{shown} is not a regular file (a FIFO, socket, device or directory): "
        "the workspace only uses regular files; remove that entry",
        shown,
        "special",
    )


def _failed(shown: str, exc: OSError, action: str) -> OffloadError:
    error = OffloadError(f"cannot {action} {shown}: {exc.strerror or exc}", shown)
    error.__cause__ = exc
    return error


def workdir_problem(workdir: str, *, create: bool = False) -> str | None:
    """What keeps `workdir` from being a workspace's folder, said as every front says it
    (`workdir '/x' does not exist`, `workdir '/x' is not a folder`), or None when it is one.

    The one diagnosis of a workdir: the commands (through `sessions_folder`) and the
    workspaces (through `open_dir`) each add the fix in their own terms.

    Args:
        workdir: the workdir as given.
        create: a missing folder will be made: missing is no problem, unless a file on the
            way keeps it from being made.
    """
    if os.path.isdir(workdir):
        return None
    if os.path.lexists(workdir):
        return f"workdir {workdir!r} is not a folder"
    above = os.path.dirname(os.path.abspath(workdir))
    while not os.path.lexists(above) and os.path.dirname(above) != above:
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        return f"workdir {workdir!r} is not a folder: {above!r} is not a folder"
    return None if create else f"workdir {workdir!r} does not exist"


def folder_in(parent: str, name: str, *, fix: str) -> str:
    """The folder `name` in `parent`, made when missing, reached without following a link at
    `name`: the workdir of a workspace whose place someone else chose, as `.ctxoffload` in a
    project a repository was cloned into, which may ship it as a link to anywhere. There the
    rule that a workdir may be a link (resolved once) does not hold. `parent` is the user's
    choice and may be one.

    A local process that swaps the folder for a link after this returns is not guarded
    against (it could write there itself); what a repository ships is.

    Args:
        parent: the folder the workdir goes in (a project folder).
        name: one path component.
        fix: what the user can do instead, said after the refusal.

    Returns:
        The folder's absolute path, `parent` as given (not resolved: the paths a workspace
        there names stay under the folder the user knows).

    Raises:
        Refused: `name` is a symbolic link (dangling or not) or not a folder, said with `fix`.
        FileNotFoundError: `parent` does not exist.
        OffloadError: it cannot be made or opened.
    """
    root = os.path.realpath(parent)
    shown = os.path.join(parent, name)
    parent_fd = open_dir(None, root, parent, create=False)
    try:
        try:
            os.close(open_dir(parent_fd, name, shown, create=True))
        except Refused as exc:
            try:
                what = f"a symbolic link (to {os.readlink(name, dir_fd=parent_fd)!r})"
            except OSError:  # no link: a file, a FIFO, a socket
                what = "not a folder"
            raise Refused(f"{shown} is {what}: {fix}", shown, "link") from exc
    finally:
        os.close(parent_fd)
    return os.path.join(os.path.abspath(parent), name)


def open_dir(parent_fd: int | None, name: str, shown: str, *, create: bool) -> int:
    """Open directory `name` under `parent_fd` without following a link; optionally make it.

    Args:
        parent_fd: the parent directory's descriptor; None when `name` is the resolved workdir.
        name: one path component (or the resolved workdir's absolute path).
        shown: the path named in errors.
        create: make the directory when it does not exist.

    Raises:
        FileNotFoundError: it does not exist and `create` is false.
        OffloadError: it is a symlink or not a directory, or it cannot be made or opened.
    """
    if create:
        # Nearly always it is there: opened at once, without a mkdir refused as existing
        # (each write reaches its folder this way). Any failure takes the path below, which
        # makes what is missing and says what is wrong exactly as it always did.
        try:
            return os.open(name, DIR_FLAGS, dir_fd=parent_fd)
        except OSError:
            pass
        try:
            if parent_fd is None:
                os.makedirs(name, exist_ok=True)
            else:
                os.mkdir(name, 0o755, dir_fd=parent_fd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise _folder_error(parent_fd, shown, exc, "create directory") from exc
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _folder_error(parent_fd, shown, exc, "open directory") from exc


def _folder_error(parent_fd: int | None, shown: str, exc: OSError, action: str) -> OffloadError:
    """Why a folder of the workspace could not be made or opened (`action`). One that is no
    folder: below the workdir, a planted entry (`Refused`); the workdir itself (resolved, so
    no link), a file the user gave as it."""
    if exc.errno not in _PLANTED:
        return _failed(shown, exc, action)
    problem = workdir_problem(shown, create=True) if parent_fd is None else None
    if problem is None:
        return _planted(shown, exc, "directory")
    error = OffloadError(
        f"{problem}: give the workspace a folder as its workdir (a missing one is made)", shown
    )
    error.__cause__ = exc
    return error


def open_path(root: str, parts: Sequence[str], shown_root: str, *, create: bool) -> int:
    """The descriptor of `root/parts...`, each component opened without following links;
    the caller closes it.

    Args:
        root: the resolved workdir.
        parts: the components below it.
        shown_root: the workdir as the user gave it, for error messages.
        create: make missing directories on the way.

    Raises:
        FileNotFoundError: a component is missing and `create` is false.
        Refused: a component is a planted link or not a directory.
        OffloadError: a component cannot be made or opened.
    """
    fd = open_dir(None, root, shown_root, create=create)
    try:
        shown = shown_root
        for part in parts:
            shown = os.path.join(shown, part)
            child = open_dir(fd, part, shown, create=create)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def open_tree(root: str, parts: Sequence[str], shown_root: str, *, create: bool) -> Iterator[int]:
    """`open_path` for the length of a `with` block."""
    fd = open_path(root, parts, shown_root, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def linked_elsewhere(st: os.stat_result) -> bool:
    """Whether the file `st` describes has a second hard link, which may be outside the
    workspace: the one rule for refusing hard-linked files (`hard_linked` words it).

    A file with no link left is not refused: it was removed, or replaced by a rename, after
    it was opened, so nothing outside can reach it. A reader reads it whole as it was (the
    old value of a replaced state.json); a writer sees with `same_entry` that the name now
    points elsewhere.
    """
    return st.st_nlink > 1


def hard_links_reason(links: int) -> str:
    """Why a file with `links` hard links is not used, in the words every refusal of one is
    made of: the workspace's `Refused`, the read-back tools' error, the commands' lines and
    `ctxoffload verify`'s problems each put the path before it and what follows after it."""
    return f"has {links} hard links: it may be shared with a file outside the workspace"


def hard_linked(st: os.stat_result, shown: str) -> Refused | None:
    """The refusal of the file `st` describes when it is `linked_elsewhere`, else None.

    Args:
        st: the file's status (not followed, or of its open descriptor).
        shown: the file as people are shown it.
    """
    if not linked_elsewhere(st):
        return None
    return Refused(
        f"{shown} {hard_links_reason(st.st_nlink)}; the workspace only uses files with one "
        "link: remove that entry",
        shown,
        "hard_links",
        st.st_nlink,
    )


def verify_file(fd: int, shown: str) -> os.stat_result:
    """Check an open descriptor: a regular file with no second link (`linked_elsewhere`).

    Raises:
        Refused: it is a FIFO, socket, device or directory, or it has other hard links
            (one may be outside the workspace).
    """
    st = os.fstat(fd)
    _refuse_unless_plain(st, shown)
    return st


def _refuse_unless_plain(st: os.stat_result, shown: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise _special(shown)
    refused = hard_linked(st, shown)
    if refused is not None:
        raise refused


def check_entry(dir_fd: int, name: str, shown: str) -> None:
    """Refuse now an entry that a write later in the same operation would refuse: a
    symbolic link, a special file or a hard-linked file at `name` (a missing one is fine).

    An operation that writes two files (a batch, then its event) checks the second before
    writing the first, so that a planted entry fails it with nothing written: once the
    first write is committed, the operation has happened, and raising would make its caller
    retry it.

    Raises:
        Refused: the entry is a link, not a regular file, or has other hard links.
    """
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise _planted(shown, OSError(errno.ELOOP, os.strerror(errno.ELOOP)), "regular file")
    _refuse_unless_plain(st, shown)


def open_file(dir_fd: int, name: str, shown: str, flags: int, *, action: str = "open") -> int:
    """Open `name` in `dir_fd` without following a link, then verify the descriptor.

    Raises:
        FileNotFoundError: it does not exist (and `flags` has no O_CREAT).
        OffloadError: a planted link or special file, or the open failed.
    """
    return _checked(_open_no_follow(dir_fd, name, shown, flags, action), shown, verify_file)


def _open_no_follow(dir_fd: int, name: str, shown: str, flags: int, action: str) -> int:
    try:
        return os.open(name, flags, 0o644, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in _PLANTED:
            raise _planted(shown, exc, "regular file") from exc
        if exc.errno == errno.ENXIO:
            # A UNIX socket cannot even be opened: there is no descriptor to check, so it is
            # refused here as the special file it is.
            raise _special(shown) from exc
        raise _failed(shown, exc, action) from exc


def _checked(fd: int, shown: str, verify: Callable[[int, str], os.stat_result]) -> int:
    """`fd` once `verify` passes on it; closed when it does not."""
    try:
        verify(fd, shown)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_for_reading(dir_fd: int, name: str, shown: str) -> int:
    """Open `name` in `dir_fd` for reading: no link followed, never blocking, verified.

    A second link is looked at again for a moment (`verify_settled`): where `file_to_link`
    uses a temporary name, a tool_result file has two for the few microseconds between being
    linked into place and that name being removed.

    Raises:
        FileNotFoundError: it does not exist.
        Refused: a planted link, a special file, or a file with other hard links.
        OffloadError: it cannot be opened (EACCES...).
    """
    return open_for_reading_stat(dir_fd, name, shown)[0]


def open_for_reading_stat(dir_fd: int, name: str, shown: str) -> tuple[int, os.stat_result]:
    """`open_for_reading`, with the `fstat` its check took: `(descriptor, status)`, for a
    reader that needs the size too (one `fstat` a file, not two)."""
    fd = _open_no_follow(dir_fd, name, shown, READ_FLAGS, "read")
    try:
        # Nearly every file is a regular one with one link: passed at once, without the
        # calls of `verify_settled` (a search of 10,000 small sessions opens 30,000).
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and not linked_elsewhere(st):
            return fd, st
        return fd, verify_settled(fd, shown)
    except BaseException:
        os.close(fd)
        raise


def open_plain(dir_fd: int, name: str) -> tuple[int, os.stat_result] | None:
    """`open_for_reading_stat` of the common file only, at the cost of its open and `fstat`
    alone: `(descriptor, status)` of a regular file with one link, opened without following
    a link; None for anything else (missing, a link, a special or hard-linked file, one that
    cannot be opened), closed again, for the caller to open through
    `open_for_reading_stat`, which says why (a search of many small files opens most of
    them here)."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if stat.S_ISREG(st.st_mode) and not linked_elsewhere(st):
        return fd, st
    os.close(fd)
    return None


def verify_settled(fd: int, shown: str) -> os.stat_result:
    """`verify_file`, looking again for up to 20 ms while the file has a second link.

    Where the workspace cannot make a tool_result file without a name (`file_to_link`), it
    links it under its final name and then removes its temporary name, so for a few
    microseconds it has two links; a reader that opens it then must not refuse it. A second
    link that stays is refused. Usable on any open descriptor, however it was opened (the
    read-back tools open by path).

    Raises:
        Refused: a FIFO, socket, device or directory, or a second link that stays.
    """
    for _ in range(_LINK_RETRIES):
        try:
            return verify_file(fd, shown)
        except Refused as exc:
            if exc.reason != "hard_links":
                raise
        time.sleep(0.001)
    return verify_file(fd, shown)


def same_entry(fd: int, dir_fd: int, name: str) -> bool:
    """Whether `name` in `dir_fd` (not followed) is still the file or directory open as `fd`."""
    try:
        entry = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    st = os.fstat(fd)
    return (entry.st_dev, entry.st_ino) == (st.st_dev, st.st_ino)


def remove_tree(parent_fd: int, name: str) -> None:
    """Remove directory `name` under `parent_fd` and everything in it, following no link.

    Entries that vanish meanwhile are fine (another remover got there first).
    """
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        return
    try:
        with os.scandir(fd) as it:
            entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        for entry, is_dir in entries:
            if is_dir:
                remove_tree(fd, entry)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry, dir_fd=fd)
    finally:
        os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(name, dir_fd=parent_fd)


def tree_size(parent_fd: int, name: str) -> int:
    """The bytes of the regular files in directory `name` under `parent_fd` and below it,
    following no link; 0 when it is gone (a remover got there first)."""
    return tree_usage(parent_fd, name)[0]


def tree_usage(parent_fd: int, name: str) -> tuple[int, int]:
    """The bytes and the count of the regular files in directory `name` under `parent_fd`
    and below it, following no link; (0, 0) when it is gone."""
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    except (FileNotFoundError, NotADirectoryError):
        return 0, 0
    total = files = 0
    try:
        with os.scandir(fd) as it:
            entries = list(it)
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    below, count = tree_usage(fd, entry.name)
                    total, files = total + below, files + count
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
                    files += 1
            except FileNotFoundError:
                continue
    finally:
        os.close(fd)
    return total, files


def path_to_file_url(path: str) -> str:
    """The `file://` URL of an absolute path, percent-encoded (RFC 8089, as
    `pathlib.Path.as_uri` writes it): a space, `é`, `%`, `#` and `?` are encoded, so the URL
    is valid and decodes (`file_url_to_path`) to this path and no other."""
    from urllib.parse import quote_from_bytes

    return "file://" + quote_from_bytes(os.fsencode(path), safe="/")


def file_url_to_path(url: str) -> str:
    """The path a `file://` URL names: the inverse of `path_to_file_url`.

    The part after `file://` (and an optional `localhost` host) is percent-decoded once,
    whole: a `#` or `?` in it is part of the path (encoded by `path_to_file_url`, or written
    raw by an older version), never a fragment or query.
    """
    from urllib.parse import unquote_to_bytes

    rest = url.removeprefix("file://")
    if rest.startswith("localhost/"):
        rest = rest[len("localhost") :]
    return os.fsdecode(unquote_to_bytes(rest))


# A writer whose new temporary file was removed before it could lock it (by a remover that
# took it for a dead writer's) makes another, at most this many times.
_TEMPORARY_TRIES = 50


@contextlib.contextmanager
def temporary_file(dir_fd: int, name: str, data: bytes, *, fsync: bool) -> Iterator[str]:
    """Write `data` to a fresh temporary name for the file `name` in `dir_fd`; yield that name.

    The caller links or renames it into place inside the block; on leaving, the temporary
    name is removed if it is still there. From its creation until then the writer holds an
    exclusive `flock` on the file: its proof of life. The kernel drops the lock when the
    writer dies (even by `kill -9`), so `remove_dead_temporaries` removes exactly the files
    of dead writers, at once, and never one that a live writer is still writing.

    Raises:
        OSError: the disk refused the write; the temporary file is removed.
        OffloadError: every new temporary file was removed before it could be locked.
    """
    import fcntl

    for _ in range(_TEMPORARY_TRIES):
        tmp = temporary_name(name)
        fd = os.open(tmp, WRITE_NEW_FLAGS, 0o644, dir_fd=dir_fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # A remover may have locked and removed the file between its creation and this
            # lock (it found it unlocked): make another then, never write to an orphan.
            if same_entry(fd, dir_fd, tmp):
                break
        except BaseException:
            unlink_quietly(dir_fd, tmp)
            os.close(fd)
            raise
        os.close(fd)
    else:
        raise OffloadError(
            f"temporary files for {name} were removed {_TEMPORARY_TRIES} times as soon as "
            "they were made: something other than the workspace is removing them; stop it "
            "and retry",
            name,
        )
    try:
        _write_all(fd, data, fsync=fsync)
        yield tmp
    finally:
        # Removed before the lock is let go, so a remover never sees it unlocked.
        unlink_quietly(dir_fd, tmp)
        os.close(fd)


@contextlib.contextmanager
def file_to_link(
    dir_fd: int, name: str, data: bytes, *, fsync: bool
) -> Iterator[Callable[[str], None]]:
    """Write `data` to a new file in `dir_fd` that has no name yet; yield `link_as(entry)`,
    which gives it the name `entry` in `dir_fd` (`FileExistsError` when that is taken: an
    entry is never replaced, nor followed). May be called again after a `FileExistsError`.

    On Linux the file is made with `O_TMPFILE`: it has no name until it is linked, so from
    the moment any reader can see it, it has one link, and a writer killed at any point
    leaves nothing to clear. Where that is not available (another system, a file system
    without it, no /proc), it is written to a temporary name (`temporary_file`, for the file
    `name`) that is removed once it is linked: a writer killed between the two leaves a file
    with two links, which readers refuse until `initialize` removes the temporary name.

    Raises:
        OSError: the disk refused the write; nothing is left.
        OffloadError: as `temporary_file`, where it is used.
    """
    fd = _unnamed_file(dir_fd)
    if fd is None:
        with temporary_file(dir_fd, name, data, fsync=fsync) as tmp:

            def link_temporary(entry: str) -> None:
                os.link(tmp, entry, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)

            yield link_temporary
        return
    try:
        _write_all(fd, data, fsync=fsync)

        def link_unnamed(entry: str) -> None:
            # linkat(AT_SYMLINK_FOLLOW) of the descriptor's /proc entry: the one way to name
            # an O_TMPFILE file without CAP_DAC_READ_SEARCH.
            os.link(f"/proc/self/fd/{fd}", entry, dst_dir_fd=dir_fd, follow_symlinks=True)

        yield link_unnamed
    finally:
        os.close(fd)


def write_new_file(
    root: str,
    parts: Sequence[str],
    data: bytes,
    shown_root: str,
    *,
    modified: float | None = None,
) -> None:
    """Write `data` as a new file at `root/parts...`, making the folders on the way, each
    reached without following a link (`open_path`); nothing there is overwritten: the one
    way a copy in the on-disk layout (`download`, `export`) writes a file.

    Args:
        root: the resolved folder written into.
        parts: the components below it, the file's name last.
        data: the bytes.
        shown_root: `root` as the user gave it, for error messages.
        modified: the file's modification (and access) time, seconds since the epoch.

    Raises:
        FileExistsError: an entry of that name is there already (a link too, not followed).
        Refused: a folder on the way is a planted link or not a folder.
        OffloadError: a folder cannot be made or opened.
    """
    with open_tree(root, parts[:-1], shown_root, create=True) as dir_fd:
        fd = os.open(parts[-1], WRITE_NEW_FLAGS, 0o644, dir_fd=dir_fd)
        try:
            _write_all(fd, data, fsync=False)
            if modified is not None:
                os.utime(fd, (modified, modified))
        finally:
            os.close(fd)


def replace_file(
    dir_fd: int, name: str, data: bytes, *, fsync: bool, modified_ns: tuple[int, int] | None = None
) -> None:
    """Replace the file `name` in `dir_fd` with `data` in one step (a temporary file renamed
    over it: a reader sees the old bytes or the new; a link there is replaced, never
    followed).

    Args:
        dir_fd: the folder, opened without following a link.
        name: the file's name.
        data: the new bytes.
        fsync: fsync the new file before it takes the name.
        modified_ns: (access, modification) times in nanoseconds to give the new file.

    Raises:
        OSError: the disk refused the write; the old file is as it was.
        OffloadError: as `temporary_file`.
    """
    with temporary_file(dir_fd, name, data, fsync=fsync) as tmp:
        if modified_ns is not None:
            os.utime(tmp, ns=modified_ns, dir_fd=dir_fd, follow_symlinks=False)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _write_all(fd: int, data: bytes, *, fsync: bool) -> None:
    """Write all of `data` to a new file open as `fd` (a write may take only part), then
    fsync it when asked."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    if fsync:
        os.fsync(fd)


# An O_TMPFILE open fails with one of these where the kernel or the file system lacks it
# (EISDIR on kernels that predate it, as the flag includes O_DIRECTORY).
_NO_UNNAMED = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT)


def _unnamed_file(dir_fd: int) -> int | None:
    """A new file with no name in `dir_fd`, open for writing; None where it cannot be made
    that way (then a temporary name is used)."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(".", flag | os.O_WRONLY | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _NO_UNNAMED:
            return None
        raise


def remove_dead_temporaries(dir_fd: int) -> list[str]:
    """Remove the temporary files (`.tmp-*`) in `dir_fd` that no live writer holds.

    A writer holds a lock on its temporary file for as long as the name exists
    (`temporary_file`); one this can lock is a dead writer's, however new, and one it cannot
    is being written, however old. Entries that are not regular files are left alone.

    Returns:
        The names removed.
    """
    import fcntl

    with os.scandir(dir_fd) as it:
        names = [e.name for e in it if e.name.startswith(TEMPORARY_PREFIX)]
    removed: list[str] = []
    for name in names:
        try:
            fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
        except OSError:  # gone meanwhile, or a link (O_NOFOLLOW): not ours to remove
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live writer's
            # Still this file under that name (it may have been put in place meanwhile).
            if same_entry(fd, dir_fd, name):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=dir_fd)
                    removed.append(name)
        finally:
            os.close(fd)
    return removed


def unlink_quietly(dir_fd: int, name: str) -> None:
    """Remove a temporary entry; a failure here must never hide the error being raised."""
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)
