"""Layer 3, git: objects and snapshots, the write loop, locks, the one place that runs the
git binary, trust and the user's local configuration, packing."""
