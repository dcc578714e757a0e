"""Layer 5, features: lifecycle, layered documents, the knowledge graph, review, audit,
transfer, purge, migrations."""
