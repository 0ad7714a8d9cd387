"""The journal: the only place in the package that speaks SQL."""
