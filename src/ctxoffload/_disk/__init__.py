"""The private disk core: how a workspace's files are named, opened, written and read back.

Every package imports these modules directly (`from .._disk.layout import CONTEXT_FILE`); no
package face re-exports them, so nothing here is public API and any of it may change. One job
a module: `layout` (the names on disk), `paths` and `ids` (no-follow opening, temporary files,
session-id rules), `batch`, `jsonl` and `writer` (appending a batch and its commit record, the
writer's identity), `read` (committed lines, events, references, rebuilding a step), `payloads`
(what a tool result or a data block becomes on disk) and `scope` (which sessions a reference
may reach).
"""
