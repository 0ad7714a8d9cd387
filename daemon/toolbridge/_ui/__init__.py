"""The local web view of a journal's runs (``toolbridge ui``, ``bridge.serve_ui()``).

It reads through the ``Journal`` protocol only (``list_runs``, ``get_run``, ``load_steps``, ``approvals``),
so it knows nothing of runs in memory, tools or sandboxes, and serves on loopback only;
it decides requests through ``Approvals`` over that journal (``decide.py``).
"""
