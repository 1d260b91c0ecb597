"""A bucket that does not exist is an error for every command that reads one: exit 2 (the
documented status for an error), never 1, which means "nothing found" (grep's no match,
verify's problems). Over a real S3 API."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Server


@pytest.mark.parametrize(
    "argv",
    [["grep", "ORD-58213"], ["ls"], ["verify"], ["stats"], ["show", "run-1"]],
    ids=lambda argv: argv[0],
)
def test_a_missing_bucket_exits_2(s3: S3Server, argv: list[str]) -> None:
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": s3.endpoint_url,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        # Until the store tells a missing bucket from a slow one, it retries to the deadline.
        "CTXOFFLOAD_DEADLINE": "3",
    }
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", *argv, "--workdir", "s3://no-such-bucket-23/x"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
