"""The memory tool's files on disk: each command, blocking, confined to one folder of
`memories/` and reaching it as the workspace reaches every file (`_disk/paths.py`).

- Every folder is opened one name at a time from the resolved workdir, without following a
  link (`open_dir`); a file is opened without following one and checked on the open
  descriptor (`open_for_reading`: a regular file with one link). A link planted anywhere,
  in `memories/` or above it, is refused and named, never followed, never replaced.
- A file is written whole under a temporary name and renamed into place
  (`temporary_file`), a new one linked into place without replacing anything
  (`file_to_link`): a reader, or a process killed at any moment, sees the old file or the
  new one, never part of either. A folder being deleted is renamed aside first (to a hidden
  `.purge-` name), so it is gone at once, whole, even if the removal is cut short.
- Every change holds an exclusive `flock` on `memories/` from reading the file to putting
  the new one in place, in every process and thread: two agents editing one memory at once
  each see the other's edit, and neither is lost. Views take no lock (they read a whole
  file, old or new). Under the lock, what a killed writer left in the folder written to (a
  temporary file, a folder renamed aside) is removed.
- A file is at most `max_file_bytes`, the folder at most `max_folder_bytes`; a change that
  would pass either is refused with nothing written.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .._disk.events import MemoryChange
from .._disk.layout import MEMORIES_DIR, PURGING_PREFIX, purging_name
from .._disk.paths import (
    Refused,
    file_to_link,
    open_dir,
    open_for_reading,
    open_path,
    open_tree,
    remove_dead_temporaries,
    remove_tree,
    same_entry,
    temporary_file,
    tree_size,
    tree_usage,
)
from .._search.sniff import SNIFF_BYTES, binary_reason
from ..exceptions import ToolError
from ._memory_paths import MEMORY_ROOT, memory_parts, memory_path
from ._memory_text import (
    bounded,
    encoded,
    human_size,
    inserted,
    listing_header,
    numbered_view,
    replaced,
)

__all__ = ["MemoryFiles"]

# The most entries one view of a folder lists; it then says how many it left out.
_MAX_LISTED = 500
_HIDDEN = "node_modules"


class _Missing(ToolError):
    """A path that names nothing (Anthropic's sentence for it)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"The path {path} does not exist. Please provide a valid path.")


@dataclass
class _Entry:
    """What a name in a folder is, not followed: `file`, `dir`, `link`, `special`, `missing`."""

    kind: str
    size: int = 0


def _entry(dir_fd: int, name: str) -> _Entry:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return _Entry("missing")
    if stat.S_ISLNK(st.st_mode):
        return _Entry("link")
    if stat.S_ISDIR(st.st_mode):
        return _Entry("dir")
    if stat.S_ISREG(st.st_mode):
        return _Entry("file", st.st_size)
    return _Entry("special")


def _refused(path: str, entry: _Entry) -> ToolError:
    """Why the tool does not use a link or a special file at `path`."""
    if entry.kind == "link":
        return ToolError(
            f"The path {path} is a symbolic link: the memory tool follows no link (its "
            "target is neither read nor written); remove the link, or use another path"
        )
    return ToolError(
        f"The path {path} is not a regular file or directory (a pipe, socket or device): "
        "the memory tool only keeps files; remove it, or use another path"
    )


class MemoryFiles:
    """The commands of the memory tool on one workspace's `memories/`, blocking.

    Each command takes the folder below the workdir that `/memories` is for this call (see
    `memory_folder`) and returns its answer; a change also returns its event.

    Args:
        root: the workdir, resolved (links in it followed once, as the workspace does).
        shown: the workdir as the user gave it, for errors about a folder of it.
        fsync: flush each file written to stable storage (the workspace's setting).
        max_file_bytes: the most bytes of one memory file.
        max_folder_bytes: the most bytes of the files in the folder a tool serves.
        max_output_chars: the longest answer of `view`.
        max_line_chars: the longest line `view` shows.
    """

    def __init__(
        self,
        root: str,
        shown: str,
        *,
        fsync: bool,
        max_file_bytes: int,
        max_folder_bytes: int,
        max_output_chars: int,
        max_line_chars: int,
    ) -> None:
        self.root = root
        self.shown = shown
        self.fsync = fsync
        self.max_file_bytes = max_file_bytes
        self.max_folder_bytes = max_folder_bytes
        self.max_output_chars = max_output_chars
        self.max_line_chars = max_line_chars

    # -- reaching the folder and the names in it ---------------------------------------------

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """Hold the lock every change of `memories/` holds (made if missing)."""
        with open_tree(self.root, (MEMORIES_DIR,), self.shown, create=True) as fd:
            fcntl.flock(fd, fcntl.LOCK_EX)  # let go when the descriptor closes
            yield

    @contextlib.contextmanager
    def _folder(self, folder: tuple[str, ...]) -> Iterator[int | None]:
        """The folder's descriptor; None when it does not exist yet."""
        try:
            fd = open_path(self.root, folder, self.shown, create=False)
        except FileNotFoundError:
            yield None
            return
        try:
            yield fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _made(self, folder: tuple[str, ...], parts: list[str]) -> Iterator[int]:
        """The directory that is to hold the last of `parts`, made if missing (the folder
        too)."""
        with (
            open_tree(self.root, folder, self.shown, create=True) as folder_fd,
            self._parent(folder_fd, parts, create=True) as dir_fd,
        ):
            yield dir_fd

    @contextlib.contextmanager
    def _existing(self, folder: tuple[str, ...], parts: list[str]) -> Iterator[int]:
        """The directory holding the last of `parts`, which must exist already."""
        with self._folder(folder) as folder_fd:
            if folder_fd is None:
                raise _Missing(memory_path(parts))
            with self._parent(folder_fd, parts, create=False) as dir_fd:
                yield dir_fd

    @contextlib.contextmanager
    def _parent(self, folder_fd: int, parts: list[str], *, create: bool) -> Iterator[int]:
        """The directory holding the last of `parts` (its folders made if `create`), each
        opened without following a link.

        Raises:
            _Missing: a folder on the way does not exist and `create` is false.
            ToolError: a name on the way is a file, a link or a special file.
        """
        fd = os.dup(folder_fd)
        try:
            for depth, name in enumerate(parts[:-1], start=1):
                try:
                    child = open_dir(fd, name, name, create=create)
                except FileNotFoundError:
                    raise _Missing(memory_path(parts)) from None
                except Refused:
                    raise self._in_the_way(fd, name, memory_path(parts[:depth])) from None
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    @staticmethod
    def _in_the_way(dir_fd: int, name: str, path: str) -> ToolError:
        entry = _entry(dir_fd, name)
        if entry.kind == "file":
            return ToolError(
                f"The path {path} is a file, not a directory: a file cannot hold other files; "
                "use another path"
            )
        return _refused(path, entry)

    def _folder_bytes(self, folder: tuple[str, ...]) -> int:
        """The bytes of the regular files in the folder and below it (no link followed)."""
        with open_tree(self.root, folder[:-1], self.shown, create=False) as parent_fd:
            return tree_size(parent_fd, folder[-1])

    def _check_sizes(self, folder: tuple[str, ...], path: str, before: int, after: int) -> None:
        """Refuse a change that leaves the file at `after` bytes (from `before`) when it
        passes a limit."""
        if after > self.max_file_bytes:
            raise ToolError(
                f"{path} would be {after:,} bytes, over the limit of {self.max_file_bytes:,} "
                "bytes for one memory file: nothing was written; keep memory files short "
                "(split this one by topic, or remove what is outdated)"
            )
        used = self._folder_bytes(folder)
        if after > before and used - before + after > self.max_folder_bytes:
            raise ToolError(
                f"the memory directory would hold {used - before + after:,} bytes, over its "
                f"limit of {self.max_folder_bytes:,}: nothing was written; delete or shorten "
                f"memories you no longer need (view {MEMORY_ROOT} lists them with their sizes)"
            )

    @staticmethod
    def _sweep(dir_fd: int) -> None:
        """Remove what a killed writer left in a folder of memories: its temporary files and
        the folders it renamed aside to delete. Called under the lock, where no live writer
        of memories has any."""
        remove_dead_temporaries(dir_fd)
        with os.scandir(dir_fd) as it:
            aside = [e.name for e in it if e.name.startswith(PURGING_PREFIX)]
        for name in aside:
            if _entry(dir_fd, name).kind == "dir":
                remove_tree(dir_fd, name)

    def _read(self, dir_fd: int, name: str, path: str) -> tuple[int, bytes]:
        """The open descriptor and the bytes of the memory file `name`; the caller closes it.

        Raises:
            _Missing, ToolError: no file there; a directory, a link, a special file, a file
                with a second link, a file over the limit or a binary one.
        """
        entry = _entry(dir_fd, name)
        if entry.kind == "missing":
            raise _Missing(path)
        if entry.kind == "dir":
            raise ToolError(
                f"The path {path} is a directory: only view and delete take a directory; "
                "pass a file's path"
            )
        if entry.kind != "file":
            raise _refused(path, entry)
        try:
            fd = open_for_reading(dir_fd, name, path)
        except FileNotFoundError:
            raise _Missing(path) from None
        try:
            data = _read_at_most(fd, self.max_file_bytes + 1)
            if len(data) > self.max_file_bytes:
                raise ToolError(
                    f"{path} is {os.fstat(fd).st_size:,} bytes, over the limit of "
                    f"{self.max_file_bytes:,} bytes for one memory file: it is not shown or "
                    "edited; delete it, or read it with another tool"
                )
            why = binary_reason(data[:SNIFF_BYTES])
            if why is not None:
                raise ToolError(
                    f"{path} is a binary file ({len(data):,} bytes, {why}): the memory tool "
                    "keeps text; delete it, or use another path"
                )
        except BaseException:
            os.close(fd)
            raise
        return fd, data

    def _put(self, dir_fd: int, name: str, read_fd: int, path: str, data: bytes) -> None:
        """Replace the file `name`, open as `read_fd`, by `data` in one step."""
        if not same_entry(read_fd, dir_fd, name):
            raise ToolError(
                f"{path} was replaced by another program while it was edited: nothing was "
                "written; view it and edit it again"
            )
        self._sweep(dir_fd)
        with temporary_file(dir_fd, name, data, fsync=self.fsync) as tmp:
            # rename() replaces the entry itself, never a file it might point to.
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)

    def _edit(
        self, folder: tuple[str, ...], parts: list[str], edit: Callable[[bytes], bytes]
    ) -> tuple[bytes, bytes]:
        """Read the memory file at `parts`, change it with `edit` and put the result in
        place, all under the lock; the bytes before and after."""
        shown = memory_path(parts)
        with self._changing(), self._existing(folder, parts) as dir_fd:
            fd, data = self._read(dir_fd, parts[-1], shown)
            try:
                changed = edit(data)
                self._check_sizes(folder, shown, len(data), len(changed))
                self._put(dir_fd, parts[-1], fd, shown, changed)
            finally:
                os.close(fd)
        return data, changed

    # -- the commands ------------------------------------------------------------------------

    def view(self, folder: tuple[str, ...], path: object, view_range: object) -> str:
        """`view`: a folder's listing, or a file's numbered lines."""
        parts = memory_parts(path)
        shown = memory_path(parts)
        with self._folder(folder) as folder_fd:
            if folder_fd is None:
                if parts:
                    raise _Missing(shown)
                _no_range(view_range)
                return f"{listing_header(shown)}\n{human_size(0)}\t{shown}"
            if not parts:
                return self._listing(folder_fd, shown, view_range)
            with self._parent(folder_fd, parts, create=False) as dir_fd:
                name = parts[-1]
                if _entry(dir_fd, name).kind == "dir":
                    listed_fd = open_dir(dir_fd, name, shown, create=False)
                    try:
                        return self._listing(listed_fd, shown, view_range)
                    finally:
                        os.close(listed_fd)
                fd, data = self._read(dir_fd, name, shown)
                os.close(fd)
        return numbered_view(
            shown,
            data,
            view_range,
            budget=self.max_output_chars,
            max_line_chars=self.max_line_chars,
        )

    def _listing(self, dir_fd: int, path: str, view_range: object) -> str:
        """A folder's files and folders two levels deep, with their sizes; hidden names,
        node_modules, links and special files left out."""
        _no_range(view_range)
        rows: list[tuple[str, int]] = []
        total = 0
        left_out = 0
        for name, size, below in _visible(dir_fd):
            total += size
            if len(rows) < _MAX_LISTED:
                rows.append((f"{path}/{name}", size))
            else:
                left_out += 1
            for child, child_size in below:
                if len(rows) < _MAX_LISTED:
                    rows.append((f"{path}/{name}/{child}", child_size))
                else:
                    left_out += 1
        lines = [listing_header(path), f"{human_size(total)}\t{path}"]
        used = sum(len(line) + 1 for line in lines)
        for shown, size in rows:
            line = f"{human_size(size)}\t{shown}"
            if used + len(line) + 1 > self.max_output_chars - 200:
                left_out += 1
                continue
            lines.append(line)
            used += len(line) + 1
        if left_out:
            lines.append(f"… {left_out:,} more entries not listed: view a folder to list it")
        return "\n".join(lines)

    def create(
        self, folder: tuple[str, ...], path: object, file_text: object
    ) -> tuple[str, MemoryChange]:
        """`create`: a new file; an existing path is an error."""
        parts = memory_parts(path)
        shown = memory_path(parts)
        if not parts:
            raise ToolError(
                f"{MEMORY_ROOT} is the memory directory: pass a file's path, such as "
                f"{MEMORY_ROOT}/notes.md"
            )
        data = encoded("file_text", file_text)
        assert isinstance(file_text, str)  # `encoded` said so
        with self._changing(), self._made(folder, parts) as dir_fd:
            name = parts[-1]
            entry = _entry(dir_fd, name)
            if entry.kind == "dir":
                raise ToolError(
                    f"The path {shown} is a directory: pass a file's path that does not exist"
                )
            if entry.kind in ("link", "special"):
                raise _refused(shown, entry)
            if entry.kind == "file":
                raise ToolError(f"File {shown} already exists")
            self._check_sizes(folder, shown, 0, len(data))
            self._sweep(dir_fd)
            with file_to_link(dir_fd, name, data, fsync=self.fsync) as link_as:
                try:
                    link_as(name)
                except FileExistsError:
                    raise ToolError(f"File {shown} already exists") from None
        change = MemoryChange(
            command="create",
            path=shown,
            folder="/".join(folder),
            bytes_before=0,
            bytes_after=len(data),
            added=bounded(file_text),
            chars_added=len(file_text),
        )
        return f"File created successfully at: {shown}", change

    def str_replace(
        self, folder: tuple[str, ...], path: object, old_str: object, new_str: object
    ) -> tuple[str, MemoryChange]:
        """`str_replace`: `old_str`, found exactly once, replaced by `new_str`."""
        parts = memory_parts(path)
        shown = memory_path(parts)
        encoded("old_str", old_str)
        encoded("new_str", new_str)
        assert isinstance(old_str, str) and isinstance(new_str, str)
        found: list[tuple[int, str]] = []

        def replace(data: bytes) -> bytes:
            changed, line, answer = replaced(shown, data, old_str, new_str)
            found.append((line, answer))
            return changed

        data, changed = self._edit(folder, parts, replace)
        ((line, answer),) = found
        change = MemoryChange(
            command="str_replace",
            path=shown,
            folder="/".join(folder),
            bytes_before=len(data),
            bytes_after=len(changed),
            line=line,
            removed=bounded(old_str),
            added=bounded(new_str),
            chars_removed=len(old_str),
            chars_added=len(new_str),
        )
        return answer, change

    def insert(
        self, folder: tuple[str, ...], path: object, insert_line: object, insert_text: object
    ) -> tuple[str, MemoryChange]:
        """`insert`: `insert_text` after line `insert_line` (0: at the top)."""
        parts = memory_parts(path)
        shown = memory_path(parts)
        encoded("insert_text", insert_text)
        assert isinstance(insert_text, str)
        data, changed = self._edit(
            folder, parts, lambda data: inserted(data, insert_line, insert_text)
        )
        change = MemoryChange(
            command="insert",
            path=shown,
            folder="/".join(folder),
            bytes_before=len(data),
            bytes_after=len(changed),
            line=int(insert_line),  # type: ignore[call-overload]  # `inserted` checked it
            added=bounded(insert_text),
            chars_added=len(insert_text),
        )
        return f"The file {shown} has been edited.", change

    def delete(self, folder: tuple[str, ...], path: object) -> tuple[str, MemoryChange]:
        """`delete`: a file, or a folder and everything in it."""
        parts = memory_parts(path)
        shown = memory_path(parts)
        if not parts:
            raise ToolError(
                f"Cannot delete the {MEMORY_ROOT} directory itself: delete the files or "
                "folders in it one by one"
            )
        removed = ""
        with self._changing(), self._existing(folder, parts) as dir_fd:
            name = parts[-1]
            entry = _entry(dir_fd, name)
            if entry.kind == "missing":
                raise _Missing(shown)
            if entry.kind == "file":
                removed = _head(dir_fd, name, shown)
                size, files = entry.size, 1
                os.unlink(name, dir_fd=dir_fd)
            elif entry.kind == "dir":
                size, files = tree_usage(dir_fd, name)
                aside = purging_name(name[:64])  # unique by its time; short enough for any name
                # Gone at once, whole: a removal cut short leaves a hidden folder that the
                # next change here removes, never half a folder of memories.
                os.rename(name, aside, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                remove_tree(dir_fd, aside)
            else:
                raise _refused(shown, entry)
        change = MemoryChange(
            command="delete",
            path=shown,
            folder="/".join(folder),
            bytes_before=size,
            bytes_after=0,
            directory=entry.kind == "dir",
            files=files,
            removed=bounded(removed),
            chars_removed=len(removed),
        )
        return f"Successfully deleted {shown}", change

    def rename(
        self, folder: tuple[str, ...], old_path: object, new_path: object
    ) -> tuple[str, MemoryChange]:
        """`rename`: a file or folder moved to a path that does not exist yet."""
        old_parts = memory_parts(old_path, "old_path")
        new_parts = memory_parts(new_path, "new_path")
        old, new = memory_path(old_parts), memory_path(new_parts)
        if not old_parts or not new_parts:
            raise ToolError(
                f"Cannot rename the {MEMORY_ROOT} directory itself: rename the files or "
                "folders in it"
            )
        if new_parts[: len(old_parts)] == old_parts:
            raise ToolError(f"Cannot move {old} into itself ({new}): pass a new_path outside it")
        with self._changing(), self._existing(folder, old_parts) as old_dir_fd:
            entry = _entry(old_dir_fd, old_parts[-1])
            if entry.kind == "missing":
                raise _Missing(old)
            if entry.kind not in ("file", "dir"):
                raise _refused(old, entry)
            size, files = (
                (entry.size, 1) if entry.kind == "file" else tree_usage(old_dir_fd, old_parts[-1])
            )
            with self._made(folder, new_parts) as new_dir_fd:
                if _entry(new_dir_fd, new_parts[-1]).kind != "missing":
                    raise ToolError(f"The destination {new} already exists")
                os.rename(
                    old_parts[-1],
                    new_parts[-1],
                    src_dir_fd=old_dir_fd,
                    dst_dir_fd=new_dir_fd,
                )
        change = MemoryChange(
            command="rename",
            path=old,
            new_path=new,
            folder="/".join(folder),
            bytes_before=size,
            bytes_after=size,
            directory=entry.kind == "dir",
            files=files,
        )
        return f"Successfully renamed {old} to {new}", change


def _read_at_most(fd: int, limit: int) -> bytes:
    """The file open as `fd`, from where it is, up to `limit` bytes."""
    chunks = []
    left = limit
    while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _no_range(view_range: object) -> None:
    if view_range is not None:
        raise ToolError(
            "The `view_range` parameter is not allowed when `path` points to a directory."
        )


def _head(dir_fd: int, name: str, path: str) -> str:
    """The start of a text file about to be deleted, for its event ("" for a binary file,
    or one the workspace does not read: a second hard link)."""
    try:
        fd = open_for_reading(dir_fd, name, path)
    except (FileNotFoundError, Refused):
        return ""
    try:
        head = _read_at_most(fd, 2_000)
    finally:
        os.close(fd)
    return "" if binary_reason(head) else head.decode("utf-8", "replace")


def _visible(dir_fd: int) -> Iterator[tuple[str, int, list[tuple[str, int]]]]:
    """A folder's entries a listing shows, sorted: each name, its size (a folder's: the bytes
    of the files below it) and, for a folder, its own entries with theirs."""
    for name, is_dir, size in _entries(dir_fd):
        if not is_dir:
            yield name, size, []
            continue
        try:
            child_fd = open_dir(dir_fd, name, name, create=False)
        except (FileNotFoundError, Refused):
            continue  # gone meanwhile, or swapped for a link: not listed
        try:
            below = [
                (child, tree_size(child_fd, child) if child_is_dir else child_size)
                for child, child_is_dir, child_size in _entries(child_fd)
            ]
        finally:
            os.close(child_fd)
        yield name, tree_size(dir_fd, name), below


def _entries(dir_fd: int) -> list[tuple[str, bool, int]]:
    """The folders and regular files of a folder, sorted by name, not followed: each name,
    whether it is a folder, and a file's size; hidden names and node_modules left out."""
    found = []
    with os.scandir(dir_fd) as it:
        for entry in it:
            if entry.name.startswith(".") or entry.name == _HIDDEN:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    found.append((entry.name, True, 0))
                elif entry.is_file(follow_symlinks=False):
                    found.append((entry.name, False, entry.stat(follow_symlinks=False).st_size))
            except FileNotFoundError:
                continue
    return sorted(found)
