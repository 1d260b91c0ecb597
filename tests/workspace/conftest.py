"""Fixtures of the workspace tests: the S3 API on loopback that ObjectStoreWorkspace talks to."""

from __future__ import annotations

from s3_server import s3

__all__ = ["s3"]
