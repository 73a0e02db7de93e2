"""The version, on its own: what imports it imports nothing else (the package root would
bring the Python API with it)."""

__version__ = "0.1.0"
