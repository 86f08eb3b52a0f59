"""MCP server for tinyvmm sandboxes: ``python3 -m tinyvmm.mcp`` (stdio)."""
from .server import PROTOCOL_VERSION, TOOLS, McpServer, main, serve

__all__ = ["PROTOCOL_VERSION", "TOOLS", "McpServer", "main", "serve"]
