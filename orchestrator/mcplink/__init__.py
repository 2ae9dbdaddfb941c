"""MCP both ways: the user's MCP servers as tools for agents, and a team served as an MCP server.

The official `mcp` SDK is an optional extra, imported only here and only once a server is configured.
"""
