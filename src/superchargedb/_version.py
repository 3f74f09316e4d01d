"""The package version, on its own so the client can read it without the server."""

__version__ = "0.1.0"
