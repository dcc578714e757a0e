"""Layer 4, store and index: Store (CRUD, transactions, history), the derived SQLite index
and what reads it (search, recall, vectors, graph rows), memory-aware merge and sync."""
