"""Adapters that plug ctxoffload into other agent frameworks.

`ctxoffload.integrations.strands`: `WorkspaceStorage`, a storage for Strands Agents'
`ContextOffloader` on any ctxoffload workspace (needs nothing from Strands to import).
"""
