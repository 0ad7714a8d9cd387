"""Starting processes in a sandbox. Knows nothing of runs, journals or tools."""
