"""ObjectStoreWorkspace against a real S3 API on loopback (moto's server), in one run.

1. `offload_tool_result` of a 10 MB text vs one raw `put` of the same bytes with the same
   client (obstore). Target: ratio <= 1.2.
2. `offload_context` append latency into a session with 1,000 prior segments vs into a new
   one, for a writer that has appended before (the usual case: one PUT for the segment and
   one for its event) and for a fresh writer (a new workspace object: tail hint, a short
   listing, the newest segment and the metadata back to the second segment that states its
   first line). Target: ratio <= 1.5.
3. Reading a 1,000-segment context (`read_context`): time and segments/s.
4. The client choice: obstore vs aiobotocore on the same server, for the requests the
   workspace makes (10 MB put, small put-if-absent, small get, HEAD, listing 1,000 keys).

moto is a Python server, so absolute times are the server's more than the client's; the
ratios are what carry over. Medians, with the two sides of a ratio alternated.

Usage: python bench/bench_objectstore.py [--quick]      (pip install -e '.[test]')
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from ctxoffload import Msg, ObjectStoreWorkspace, TextBlock, ToolResultBlock
from ctxoffload._disk.layout import CONTEXT_FILE, SESSIONS_DIR

SIZE = 10 * 1024 * 1024
# The log the prior segments go to, written below the workspace (its segment log) so that
# thousands of them take seconds, not minutes.
LONG_LOG = f"{SESSIONS_DIR}/long/{CONTEXT_FILE}"
KEYS = {"access_key_id": "bench", "secret_access_key": "bench-secret", "region": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server() -> tuple[Any, str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, f"http://127.0.0.1:{port}"


def _new_bucket(endpoint: str) -> str:
    import boto3

    name = f"bench-{uuid.uuid4().hex[:16]}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=KEYS["access_key_id"],
        aws_secret_access_key=KEYS["secret_access_key"],
        region_name=KEYS["region"],
    )
    client.create_bucket(Bucket=name)
    client.close()
    return name


async def _median(fn: Callable[[], Awaitable[Any]], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _output(i: int) -> str:
    line = f"result {i}: " + "log line with a little variety 0123456789 " * 2 + "\n"
    return (line * (SIZE // len(line) + 1))[:SIZE]


async def bench_tool_result(endpoint: str, runs: int) -> float:
    import obstore

    ws = ObjectStoreWorkspace(f"s3://{_new_bucket(endpoint)}/b", endpoint_url=endpoint, **KEYS)
    store = ws._client.store
    raw_times, offload_times = [], []
    for i in range(runs):
        text = _output(i)
        data = text.encode()
        start = time.perf_counter()
        await obstore.put_async(store, f"raw/{i}.txt", data, mode="create", use_multipart=False)
        raw_times.append(time.perf_counter() - start)
        block = ToolResultBlock(id=f"call_{i}", name="fetch", output=text)
        start = time.perf_counter()
        await ws.offload_tool_result("bench", block)
        offload_times.append(time.perf_counter() - start)
    raw, offload = statistics.median(raw_times), statistics.median(offload_times)
    ratio = offload / raw
    print(
        f"offload_tool_result 10 MB: {offload * 1e3:7.1f} ms   raw put: {raw * 1e3:7.1f} ms   "
        f"ratio {ratio:.2f} (target <= 1.2)"
    )
    return ratio


def _msg(i: int) -> list[Msg]:
    return [Msg(role="user", content=[TextBlock(text=f"message {i} " + "x" * 200)])]


async def bench_append(endpoint: str, runs: int, prior: int) -> tuple[float, float, float]:
    url = f"s3://{_new_bucket(endpoint)}/b"
    ws = ObjectStoreWorkspace(url, endpoint_url=endpoint, **KEYS)
    # The prior segments, written through the same segment log the workspace uses.
    start = time.perf_counter()
    await ws.offload_context("warmup", _msg(0))
    for i in range(prior):
        await ws._logs.append(LONG_LOG, b'{"prior": %d}\n' % i)
    setup = time.perf_counter() - start
    counter = iter(range(10**9))

    async def warm(session: str) -> None:
        await ws.offload_context(session, _msg(next(counter)))

    async def fresh(session: str) -> None:
        other = ObjectStoreWorkspace(url, endpoint_url=endpoint, **KEYS)
        await other.offload_context(session, _msg(next(counter)))

    await warm("short")  # the short session has a few segments, like any live one
    warm_long, warm_short, fresh_long, fresh_short = [], [], [], []
    for _ in range(runs):
        for fn, session, into in (
            (warm, "long", warm_long),
            (warm, "short", warm_short),
            (fresh, "long", fresh_long),
            (fresh, "short", fresh_short),
        ):
            t = time.perf_counter()
            await fn(session)
            into.append(time.perf_counter() - t)
    wl, ws_, fl, fs = (
        statistics.median(x) for x in (warm_long, warm_short, fresh_long, fresh_short)
    )
    print(f"  ({prior:,} prior segments written in {setup:.1f} s)")
    print(
        f"offload_context append, writer that appended before: {wl * 1e3:6.1f} ms with "
        f"{prior:,} prior segments vs {ws_ * 1e3:6.1f} ms with a few   ratio {wl / ws_:.2f} "
        "(target <= 1.5)"
    )
    print(
        f"offload_context append, fresh writer:                {fl * 1e3:6.1f} ms with "
        f"{prior:,} prior segments vs {fs * 1e3:6.1f} ms with a few   ratio {fl / fs:.2f}"
    )
    start = time.perf_counter()
    rows = await ws.read_context("long")
    elapsed = time.perf_counter() - start
    segments = len(await ws._logs.segments(LONG_LOG))
    print(
        f"read_context of {segments:,} segments ({len(rows):,} lines): {elapsed * 1e3:.0f} ms, "
        f"{segments / elapsed:,.0f} segments/s"
    )
    return wl / ws_, fl / fs, segments / elapsed


async def bench_clients(endpoint: str, runs: int) -> None:
    import obstore
    from aiobotocore.session import get_session
    from obstore.store import S3Store

    bucket = _new_bucket(endpoint)
    store = S3Store(
        bucket,
        endpoint=endpoint,
        access_key_id=KEYS["access_key_id"],
        secret_access_key=KEYS["secret_access_key"],
        region=KEYS["region"],
        client_options={"allow_http": True},
    )
    big = b"x" * SIZE
    small = b'{"role": "user"}\n' * 20
    results: dict[str, dict[str, float]] = {"obstore": {}, "aiobotocore": {}}
    async with get_session().create_client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=KEYS["access_key_id"],
        aws_secret_access_key=KEYS["secret_access_key"],
        region_name=KEYS["region"],
    ) as s3:
        n = iter(range(10**9))

        async def ob_big() -> None:
            await obstore.put_async(store, f"big/{next(n)}", big, use_multipart=False)

        async def bo_big() -> None:
            await s3.put_object(Bucket=bucket, Key=f"big/{next(n)}", Body=big)

        async def ob_small() -> None:
            await obstore.put_async(store, f"s/{next(n):08d}", small, mode="create")

        async def bo_small() -> None:
            await s3.put_object(Bucket=bucket, Key=f"s/{next(n):08d}", Body=small, IfNoneMatch="*")

        async def ob_get() -> None:
            await (await obstore.get_async(store, "s/00000010")).bytes_async()

        async def bo_get() -> None:
            response = await s3.get_object(Bucket=bucket, Key="s/00000010")
            async with response["Body"] as body:
                await body.read()

        async def ob_head() -> None:
            await obstore.get_async(store, "s/00000010", options={"head": True})

        async def bo_head() -> None:
            await s3.head_object(Bucket=bucket, Key="s/00000010")

        for _ in range(1000):
            await ob_small()

        async def ob_list() -> None:
            assert len(await obstore.list(store, "s", chunk_size=1000).collect_async()) >= 1000

        async def bo_list() -> None:
            paginator = s3.get_paginator("list_objects_v2")
            count = 0
            async for page in paginator.paginate(Bucket=bucket, Prefix="s/"):
                count += len(page.get("Contents", []))
            assert count >= 1000

        cases = [
            ("put 10 MB", ob_big, bo_big, max(3, runs // 4)),
            ("put-if-absent 340 B", ob_small, bo_small, runs * 4),
            ("get 340 B", ob_get, bo_get, runs * 4),
            ("head", ob_head, bo_head, runs * 4),
            ("list 1,000 keys", ob_list, bo_list, max(3, runs // 2)),
        ]
        print("client comparison (median ms)      obstore  aiobotocore  aiobotocore/obstore")
        for name, ob, bo, count in cases:
            await ob()
            await bo()
            o = await _median(ob, count)
            b = await _median(bo, count)
            results["obstore"][name] = o
            results["aiobotocore"][name] = b
            print(f"  {name:<30} {o * 1e3:9.1f} {b * 1e3:12.1f} {b / o:12.2f}")


async def main(quick: bool) -> None:
    server, endpoint = _start_server()
    try:
        runs = 3 if quick else 9
        prior = 200 if quick else 1000
        await bench_tool_result(endpoint, runs)
        await bench_append(endpoint, runs * 2, prior)
        await bench_clients(endpoint, runs)
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and segments")
    asyncio.run(main(parser.parse_args().quick))
