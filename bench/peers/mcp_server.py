"""Peer: an MCP SDK server on stdio with one `echo` tool (runs in the benchmark's own venv)."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def echo(value: str) -> str:
    """Return the value."""
    return value


if __name__ == "__main__":
    server.run("stdio")
