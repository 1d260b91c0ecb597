"""Where content goes: LocalWorkspace (disk) and InMemoryWorkspace."""
