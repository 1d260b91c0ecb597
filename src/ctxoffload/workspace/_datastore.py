"""The content-addressed data/ store: each payload is written once, named by its sha256."""

from __future__ import annotations

import hashlib
import os
import stat

from .._disk.commit import iter_chunks
from .._disk.paths import READ_FLAGS, linked_elsewhere, open_file, temporary_file

__all__ = ["KnownPayloads", "data_name", "extension_for", "media_type_of", "store_bytes"]

# mimetypes.guess_extension answers differently across Python versions and platforms
# (image/jpeg -> .jpe on some); file names are part of the on-disk contract, so fix them.
_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/jpg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/svg+xml": ".svg",
    "image/bmp": ".bmp",
    "image/tiff": ".tiff",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/wave": ".wav",
    "audio/mpeg": ".mp3",
    "audio/mp3": ".mp3",
    "audio/ogg": ".ogg",
    "audio/flac": ".flac",
    "audio/webm": ".webm",
    "video/mp4": ".mp4",
    "application/pdf": ".pdf",
    "application/json": ".json",
    "application/zip": ".zip",
    "text/plain": ".txt",
    "text/csv": ".csv",
    "text/html": ".html",
    "text/markdown": ".md",
}


def extension_for(media_type: str | None) -> str:
    """The file extension used in data/ for a media type (`.bin` when unknown)."""
    if not media_type:
        return ".bin"
    return _EXTENSIONS.get(media_type.split(";", 1)[0].strip().lower(), ".bin")


def data_name(raw: bytes, media_type: str | None) -> str:
    """The data/ file name of a payload: the sha256 of its bytes, then its type's extension."""
    return f"{hashlib.sha256(raw).hexdigest()}{extension_for(media_type)}"


# The media type a stored name stands for: the first type that maps to each extension above,
# and the workspace's own text files.
_MEDIA_TYPES = {ext: media for media, ext in reversed(list(_EXTENSIONS.items()))} | {
    ".jsonl": "application/x-ndjson",
}


def media_type_of(name: str) -> str:
    """The media type of a workspace file, from its extension (`application/octet-stream`).

    The inverse of `extension_for` for the types it knows: `data/<sha>.png` is `image/png`,
    a `tool_result-*.txt` is `text/plain`, context.jsonl is `application/x-ndjson`.
    """
    _, dot, ext = name.rpartition(".")
    return (
        _MEDIA_TYPES.get(f".{ext.lower()}", "application/octet-stream")
        if dot
        else ("application/octet-stream")
    )


def _holds(data_fd: int, name: str, raw: bytes) -> bool:
    """Whether data/`name` is a regular file, one link, whose bytes are exactly `raw`."""
    try:
        fd = open_file(data_fd, name, name, READ_FLAGS, action="read")
    except OSError:
        # Missing, a planted link, a special file or another hard link: not a stored copy.
        return False
    try:
        if os.fstat(fd).st_size != len(raw):
            return False
        digest = hashlib.sha256()
        # One byte past the size seen: a file that grew since then does not match.
        for chunk in iter_chunks(fd, 0, len(raw) + 1):
            digest.update(chunk)
        if digest.digest() != hashlib.sha256(raw).digest():
            return False
        # Mark it as just used: gc() leaves recently used unreferenced files alone, so a
        # reference about to be written to a log never points at a removed file.
        os.utime(fd)
        return True
    finally:
        os.close(fd)


def store_bytes(
    data_fd: int, data_dir: str, raw: bytes, media_type: str | None, *, fsync: bool
) -> str:
    """Store `raw` as data/<sha256><ext> unless a verified copy is there; return its path.

    An existing entry is trusted only when it is a regular file with one link whose bytes
    hash to its name. Anything else there (a planted symlink, a hard link to another file,
    other bytes) is replaced atomically by a rename, which replaces the entry itself and never
    writes through it. The bytes go to a temporary name first, so a reader never sees a
    partial file, and concurrent writers of one payload leave one file with those bytes.

    Args:
        data_fd: data/, opened without following links.
        data_dir: data/ as shown in references.
        raw: the decoded payload.
        media_type: chooses the extension.
        fsync: make the file and its name durable before returning.

    Raises:
        OSError: the disk refused the write; no temporary file is left.
    """
    name = data_name(raw, media_type)
    if _holds(data_fd, name, raw):
        return os.path.join(data_dir, name)
    with temporary_file(data_fd, name, raw, fsync=fsync) as tmp:
        os.replace(tmp, name, src_dir_fd=data_fd, dst_dir_fd=data_fd)
    if fsync:
        os.fsync(data_fd)
    return os.path.join(data_dir, name)


class KnownPayloads:
    """Base64 payloads this workspace already stored, so a repeat costs no decode or hash.

    Offloading the same image again normally decodes its base64 (about 18 ms for 5 MB) and
    hashes the bytes to find its name, then re-reads and re-hashes the stored file to trust
    it. A hit here skips all of that, and is safe because it needs both:

    - the same base64 text: the text is the dict key, so a lookup compares it exactly
      (by identity when it is the same string object, else byte for byte), and the same
      text decodes to the same bytes, hence the same sha256 name;
    - a stored file unchanged since it was verified: same device, inode, size and
      `st_ctime_ns`. The kernel sets ctime on every write, rename, link or metadata change
      and no caller can set it back, so a replaced, rewritten or relinked file misses and
      goes through the full check again.

    Bounded by `max_entries` and `max_chars` of keys (least recently used dropped first);
    the keys are usually the very strings the messages already hold, so they cost little.
    """

    def __init__(self, max_entries: int = 64, max_chars: int = 256 << 20) -> None:
        import collections
        import threading

        self._entries: collections.OrderedDict[
            tuple[str, str | None], tuple[str, str, tuple[int, int, int, int]]
        ] = collections.OrderedDict()
        self._chars = 0
        self._max_entries = max_entries
        self._max_chars = max_chars
        self._lock = threading.Lock()

    def lookup(self, data: str, media_type: str | None, data_fd: int) -> str | None:
        """The reference of `data` when it is stored and unchanged since verified, else None."""
        key = (data, media_type)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
        name, reference, identity = entry
        refreshed = _unchanged(data_fd, name, identity)
        with self._lock:
            if refreshed is None:
                self._drop(key)
                return None
            if key in self._entries:
                self._entries[key] = (name, reference, refreshed)
        return reference

    def remember(self, data: str, media_type: str | None, data_fd: int, reference: str) -> None:
        """Record `data` as stored at `reference` (a data/ file just written or verified)."""
        name = os.path.basename(reference)
        identity = _identity(data_fd, name)
        if identity is None or len(data) > self._max_chars:
            return
        key = (data, media_type)
        with self._lock:
            self._drop(key)
            self._entries[key] = (name, reference, identity)
            self._chars += len(data)
            while len(self._entries) > self._max_entries or self._chars > self._max_chars:
                self._drop(next(iter(self._entries)))

    def _drop(self, key: tuple[str, str | None]) -> None:
        if self._entries.pop(key, None) is not None:
            self._chars -= len(key[0])


def _identity(data_fd: int, name: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(name, dir_fd=data_fd, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or linked_elsewhere(st):
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns


def _unchanged(
    data_fd: int, name: str, identity: tuple[int, int, int, int]
) -> tuple[int, int, int, int] | None:
    """Refresh data/`name` for gc if it is the file verified before; its new identity."""
    try:
        fd = open_file(data_fd, name, name, READ_FLAGS, action="read")
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns) != identity:
            return None
        # Just used: gc() keeps recently used files (see `_holds`). Touching the file sets
        # its ctime, which becomes the identity to compare next time.
        os.utime(fd)
        st = os.fstat(fd)
        return st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns
    finally:
        os.close(fd)
