"""The content-addressed data/ store: each payload is written once, named by its sha256."""

from __future__ import annotations

import hashlib
import os
import stat
import uuid

from ._paths import READ_FLAGS, unlink_quietly, write_new_file

__all__ = ["extension_for", "store_bytes"]

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


def _holds(data_fd: int, name: str, raw: bytes) -> bool:
    """Whether data/`name` is a regular file, one link, whose bytes are exactly `raw`."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=data_fd)
    except OSError:
        # Missing, or a planted symlink (ELOOP): not a stored copy.
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size != len(raw):
            return False
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
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
    name = f"{hashlib.sha256(raw).hexdigest()}{extension_for(media_type)}"
    if _holds(data_fd, name, raw):
        return os.path.join(data_dir, name)
    tmp = f".tmp-{name}-{uuid.uuid4().hex}"
    try:
        write_new_file(data_fd, tmp, raw, fsync=fsync)
        os.replace(tmp, name, src_dir_fd=data_fd, dst_dir_fd=data_fd)
    except BaseException:
        unlink_quietly(data_fd, tmp)
        raise
    if fsync:
        os.fsync(data_fd)
    return os.path.join(data_dir, name)
