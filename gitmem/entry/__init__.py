"""Layer 6, entry points: git hooks, the MCP server, the memory tool, doctor, team
workflows (clone, join), CI recipes, the server-side receive hook."""
