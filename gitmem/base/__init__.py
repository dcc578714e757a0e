"""Layer 1, base: errors, clock, commit trailers, state paths. Imports nothing of gitmem."""
