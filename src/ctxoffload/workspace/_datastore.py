"""The content-addressed data/ store: each payload is written once, named by its sha256."""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from pathlib import Path

__all__ = ["extension_for", "fsync_dir", "store_bytes"]

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


def fsync_dir(path: Path) -> None:
    """Make a directory's new entries durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def store_bytes(data_dir: Path, raw: bytes, media_type: str | None, *, fsync: bool) -> Path:
    """Store `raw` as data/<sha256><ext> unless it is there already; return its path.

    The bytes go to a temporary name first and are linked into place, so a reader never sees
    a partial file and concurrent writers of the same payload leave exactly one file.
    """
    final = data_dir / f"{hashlib.sha256(raw).hexdigest()}{extension_for(media_type)}"
    if final.exists():
        return final
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = data_dir / f".tmp-{final.name}-{uuid.uuid4().hex}"
    try:
        with open(tmp, "xb") as f:
            f.write(raw)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        # Another writer may have stored the same bytes first: same name, same content.
        with contextlib.suppress(FileExistsError):
            os.link(tmp, final)
        if fsync:
            fsync_dir(data_dir)
    finally:
        tmp.unlink(missing_ok=True)
    return final
