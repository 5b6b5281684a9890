"""The MCP surface: the HITL operations as tools of the official ``mcp`` SDK, streamable HTTP at /mcp.

A thin adapter over the services REST uses (same access functions, same compare-and-set, same audit,
same redacted views), mounted beside Django in the ASGI application (hitl_project.asgi). The caller is
the owner of a REST token; decisions are recorded as ``mcp:<username>``, acting as that user, so
separation of duties applies to them as to anyone. See docs/mcp.md.
"""
