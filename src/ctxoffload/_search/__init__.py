"""PRIVATE: the one search engine, imported directly by its doors and exported by none.

The agent's Grep and the retrieval tool (`readback`), `ctxoffload grep` and through it the
viewer's search (`cli`) find their lines here: `regex` (RE2 and its options, what a refused
pattern is told, `escape`), `matcher` (THE compiler of a user's pattern, for lines of bytes
or of text), `engine` (the lines of a file that match, with context, within a time bound),
`log` (the one judgment of a context.jsonl line) and `sniff` (binary or text). The rules
every door follows are stated once in docs/guides/file-tools.md ("Every search finds the
same lines").
"""
