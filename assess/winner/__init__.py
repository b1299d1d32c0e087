"""A verdict that travels (docs/production.md): the winner file (record, write), applying a cell to a pipeline of
one's own with the renderer's code (apply), and checking it there (verify). `hypergrid` re-exports the public API."""
