"""A small ReAct agent loop wiring workspace, offloader and compression together."""
