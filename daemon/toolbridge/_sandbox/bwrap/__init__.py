"""The bubblewrap launcher: its plan, its user, its cgroups."""
