"""Layer 2, format: the memory file (codec, YAML bounds, schema, layout, model, the one
encoder/decoder), the store's typed config, secret scanning, version chains."""
