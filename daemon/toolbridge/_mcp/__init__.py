"""The MCP face: a bridge's registered tools served over the Model Context Protocol.

Layer 6, beside ``_bridge/``: it uses the public :class:`~toolbridge.Bridge` API only, so an
MCP call takes the same path as a sandbox's (validation, hooks, retries, the journal).
Needs the ``toolbridge[mcp]`` extra (the official ``mcp`` SDK).
"""
