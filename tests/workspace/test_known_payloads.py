"""A repeated image skips decoding, but never trusts a data/ file that changed since."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

from ctxoffload import DataBlock, LocalWorkspace
from ctxoffload.workspace._datastore import KnownPayloads
from helpers import image_block

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40


def block(raw: bytes = PNG) -> DataBlock:
    return image_block(raw)


def offload(ws: LocalWorkspace, b: DataBlock) -> str:
    return str(asyncio.run(ws.offload_data_block(b)).source.url)


def test_a_repeat_names_the_same_file_and_keeps_it_fresh_for_gc(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    b = block()
    path = offload(ws, b)
    os.utime(path, (1, 1))  # as if long unused: the repeat must mark it used again
    assert offload(ws, b) == path
    assert os.stat(path).st_mtime > 1
    assert Path(path).read_bytes() == PNG


def test_a_file_rewritten_in_place_is_noticed_and_repaired(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    b = block()
    path = offload(ws, b)
    stat = os.stat(path)
    with open(path, "r+b") as f:  # same inode, same size, other bytes
        f.write(b"X" * len(PNG))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even with its times put back
    assert offload(ws, b) == path
    assert Path(path).read_bytes() == PNG


def test_a_removed_file_is_written_again(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    b = block()
    path = offload(ws, b)
    os.unlink(path)
    assert offload(ws, b) == path
    assert Path(path).read_bytes() == PNG


def test_a_planted_symlink_is_replaced_not_followed(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    b = block()
    path = offload(ws, b)
    outside = tmp_path / "outside.png"
    outside.write_bytes(PNG)
    os.unlink(path)
    os.symlink(outside, path)
    assert offload(ws, b) == path
    assert not os.path.islink(path)
    assert Path(path).read_bytes() == PNG


def test_other_text_of_the_same_length_is_another_file(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    other = bytearray(PNG)
    other[-1] ^= 1
    first, second = offload(ws, block()), offload(ws, block(bytes(other)))
    assert first != second
    assert Path(second).read_bytes() == bytes(other)


def test_threads_offloading_one_image_agree(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    b = block()
    paths: list[str] = []

    def worker() -> None:
        for _ in range(20):
            paths.append(offload(ws, b))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(paths)) == 1 and len(paths) == 80
    assert Path(paths[0]).read_bytes() == PNG
    assert os.listdir(tmp_path / "data") == [os.path.basename(paths[0])]


def test_the_cache_is_bounded(tmp_path: Path) -> None:
    known = KnownPayloads(max_entries=2, max_chars=10**9)
    data_fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for i in range(3):
            (tmp_path / f"{i}.png").write_bytes(b"x")
            known.remember(f"text-{i}", "image/png", data_fd, str(tmp_path / f"{i}.png"))
        assert known.lookup("text-0", "image/png", data_fd) is None  # the oldest went first
        assert known.lookup("text-2", "image/png", data_fd) == str(tmp_path / "2.png")
        assert known.lookup("text-2", "image/jpeg", data_fd) is None  # media type is part of it
    finally:
        os.close(data_fd)
