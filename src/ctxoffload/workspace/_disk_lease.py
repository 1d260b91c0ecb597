"""A session's lease file on disk (`lease.json`, locked with `flock` by its holder): who holds
it, its record read and written, and its descriptor closed once. The disk store takes a
lease under the session folder's shared lock (`DiskStore.take_lease`); gc asks who holds one
(`lease_holder`) with the folder locked exclusively."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import stat
import time
from typing import Any

from ._lease import LEASE_FILE, describe_holder, lease_record, orphaned_here

__all__ = ["LeaseCloser", "lease_holder", "read_lease_record", "why_free", "write_lease_record"]


def lease_holder(session_fd: int) -> str | None:
    """Who holds the lease of a session folder (`describe_holder`), or None when it is free.

    Call with the folder locked exclusively: takers lock the lease only while holding the
    folder shared, so the lock tried here never makes a taker find the session busy.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(LEASE_FILE, flags, dir_fd=session_fd)
    except OSError:
        return None  # none, or a planted link: no lease is held through it
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        for _ in range(2):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = read_lease_record(fd, settle=True)
                # A lease of this process whose object was dropped unreleased is free, as
                # for a taker: collecting it closes its descriptor, and the lock with it.
                if not orphaned_here(holder):
                    return describe_holder(holder)
            else:
                return None
        return describe_holder(holder)
    finally:
        os.close(fd)  # drops the lock tried


def read_lease_record(fd: int, *, settle: bool) -> dict[str, Any]:
    """What a lease file says of its holder; with `settle`, waits a moment for a holder
    that has the lock but has not yet written itself in."""
    for _ in range(20 if settle else 1):
        found = lease_record(os.pread(fd, 64 * 1024, 0))
        if found:
            return found
        if settle:
            time.sleep(0.01)
    return {}


def write_lease_record(fd: int, record: dict[str, Any]) -> None:
    """Replace what a lease file says of its holder with `record`.

    Never fsynced (issue 84: two syncs a run, waited for by the host's agent at its start
    and end). The lease is the `flock` on the file; the record only says who holds it, for
    a refusal's message and gc's. A killed process leaves it written (the page cache is the
    kernel's), and a crash of the machine, which drops every lock, at worst leaves an older
    record or none: the next taker then logs a takeover or nothing. No content rests on it.
    """
    data = json.dumps(record, ensure_ascii=False).encode() + b"\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def why_free(previous: dict[str, Any]) -> str:
    """Why a lease whose lock was free but whose record names a holder is taken over."""
    if previous.get("pid") == os.getpid() and previous.get("host") == socket.gethostname():
        return "this process dropped it without release() (an Agent not closed?)"
    return "its lock was let go without release()"


class LeaseCloser:
    """A lease's descriptor, closed once (closing it drops the lock)."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
