"""Where a reader stops in a log it read whole: the commit record is checked against the
bytes the reader holds (`readable_end(..., data)`), the bytes it shows, not read again."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from ctxoffload import LocalWorkspace, Msg
from ctxoffload._disk.commit import readable_end
from ctxoffload._disk.layout import CONTEXT_FILE


def one_session(workdir: Path) -> Path:
    """A session whose context.jsonl holds two committed batches; its folder."""

    async def build() -> None:
        ws = LocalWorkspace(workdir, fsync=False)
        for word in ("alpha", "bravo"):
            await ws.offload_context("s", [Msg(role="user", content=f"{word} needle")])

    asyncio.run(build())
    return workdir / "sessions" / "s"


def ends(folder: Path, data: bytes | None) -> int:
    """`readable_end` of the session's context.jsonl, with `data` as the bytes in hand."""
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    fd = os.open(folder / CONTEXT_FILE, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        return readable_end(dir_fd, CONTEXT_FILE, "context.jsonl", fd, size, data)
    finally:
        os.close(fd)
        os.close(dir_fd)


def test_the_record_is_checked_against_the_bytes_in_hand(tmp_path: Path) -> None:
    folder = one_session(tmp_path)
    committed = len((folder / CONTEXT_FILE).read_bytes())
    with open(folder / CONTEXT_FILE, "ab") as log:  # a batch a kill cut before its commit
        log.write(b'{"role": "user", "content": "cut')
    on_disk = (folder / CONTEXT_FILE).read_bytes()
    assert ends(folder, None) == committed
    assert ends(folder, on_disk) == committed
    # Other bytes in hand before the committed end than the record was written for (as
    # many): the record is not trusted for them, though the file on disk still matches it.
    edited = on_disk[: committed - 5] + b"X" + on_disk[committed - 4 :]  # (in the tail)
    assert ends(folder, edited) == len(on_disk)
    # The record ends inside a line of the bytes in hand: not trusted either.
    torn = on_disk[: committed - 1] + b" " + on_disk[committed:]
    assert ends(folder, torn) == len(on_disk)


def test_a_record_that_is_no_plain_file_is_not_trusted(tmp_path: Path) -> None:
    """The record is opened as every file is: a link to a record, a hard-linked record or a
    FIFO in its place is never read (the whole log counts), a missing one leaves the whole
    log too; the plain record it was still ends the log where it says."""
    folder = one_session(tmp_path / "ws")
    committed = len((folder / CONTEXT_FILE).read_bytes())
    with open(folder / CONTEXT_FILE, "ab") as log:  # a batch past the record
        log.write(b'{"role": "user", "content": "uncommitted"}\n')
    size = len((folder / CONTEXT_FILE).read_bytes())
    record = folder / (CONTEXT_FILE + ".commit")
    assert ends(folder, None) == committed
    outside = tmp_path / "record-outside"
    record.rename(outside)
    record.symlink_to(outside)  # the very record, reached through a link
    assert ends(folder, None) == size
    record.unlink()
    os.link(outside, record)  # the very record, with a second name
    assert ends(folder, None) == size
    record.unlink()
    os.mkfifo(record)  # opened without blocking, and refused
    assert ends(folder, None) == size
    record.unlink()
    assert ends(folder, None) == size
    os.rename(outside, record)
    assert ends(folder, None) == committed


def test_a_record_saying_the_whole_log_ends_it_at_its_size_whatever_follows(
    tmp_path: Path,
) -> None:
    """A record whose first field is the log's size ends the log there without being
    parsed (trusted or not, that is where it ends); one saying fewer bytes is still parsed
    and checked, and ends a log it describes at its own end."""
    folder = one_session(tmp_path)
    record = folder / (CONTEXT_FILE + ".commit")
    good = record.read_bytes()
    size = len((folder / CONTEXT_FILE).read_bytes())
    assert good.startswith(b"%020d " % size)
    assert ends(folder, None) == size
    record.write_bytes(b"%020d " % size + b"x" * (len(good) - 22) + b"\n")  # damaged after it
    assert ends(folder, None) == size
    # The same record, with the log grown past it: parsed, trusted, the log ends at it.
    record.write_bytes(good)
    with open(folder / CONTEXT_FILE, "ab") as log:
        log.write(b'{"role": "user", "content": "uncommitted"}\n')
    assert ends(folder, None) == size
    assert ends(folder, (folder / CONTEXT_FILE).read_bytes()) == size
    # A record saying one byte more than the log holds: not trusted, the whole log.
    grown = len((folder / CONTEXT_FILE).read_bytes())
    record.write_bytes(good.replace(b"%020d " % size, b"%020d " % (grown + 1), 1))
    assert ends(folder, None) == grown
