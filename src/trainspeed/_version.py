"""The release of trainspeed (one place: the package, the CLI and the reports read it)."""

__version__ = "0.1.0"
