"""When and how history is compressed."""
