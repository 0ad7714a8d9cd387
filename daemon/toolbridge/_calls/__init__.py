"""A tool call, from the bytes received to the outcome journaled."""
