"""The package version, apart so the command line can print it without importing the store."""

__version__ = "0.1.0"
