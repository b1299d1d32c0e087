"""The sqlite index: its schema and migrations, its queries, and the sqlite-utils table it writes through
(derived from the run directories, the source of truth)."""
