"""PRIVATE: the one search engine, imported directly by its doors and exported by none.

The agent's Grep and the retrieval tool (`readback`), `ctxoffload grep` and through it the
viewer's search (`cli`) find their lines here: `regex` (RE2 and its options), `matcher` (a
pattern compiled for lines of bytes), `engine` (the lines of a file or a JSONL log that
match, with context, within a time bound).
"""
