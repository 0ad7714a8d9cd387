"""Programs that run inside the sandbox, on its own Python: the standard library only."""
