"""cortex over the Model Context Protocol: agents reach their memory through `cortex mcp`.

    session.py    the server's scope (one agent or all, its tenants, read-only, rollback) and its one-call-at-a-time
                  lock
    tools.py      the tools: search, show, find, query, memory_*, recent_activity, snapshot, diff, log,
                  add_turn / get_context, rollback
    resources.py  cortex:// resources: agents' memory and daily logs, files, headlines by :ID:, snapshots' views
    activity.py   diff, log and recent activity within a scope
    server.py     the SDK's MCPServer around them, over stdio or streamable HTTP: `serve`
    http.py       who may talk to it over HTTP: bearer token off loopback, Host and Origin allowed, sessions bounded
    stdio.py      stdio with every line answered, a broken one by its JSON-RPC error
"""

from .server import serve

__all__ = ["serve"]
