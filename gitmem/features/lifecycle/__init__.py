"""Lifecycle rules over a store: staleness, code-aware staleness, prune rules, quality."""
