"""The package's version, in a module of its own so the session record can name it without
importing the package's `__init__`."""

__version__ = "0.1.0"
"""The version of ctxoffload, as the package index and `ctxoffload --version` show it."""
