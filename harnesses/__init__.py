"""What the tests and the bench scripts share: users and agents to build, the load and fault harnesses,
the live stack of real processes, and the local stand-ins for a model and a tool target.

tests/ runs each harness at a fast size, bench/ at full size; neither imports the other. No app imports
this package (import-linter's contract in pyproject.toml).
"""
