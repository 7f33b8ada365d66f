"""Errors that reach the user as one line and exit status 2."""


class UsageError(Exception):
    """Bad usage or bad input: the CLI prints the message on one line and exits 2."""


class FitError(ValueError):
    """Input that `trainspeed.fit` cannot train on; the message names the problem and the fix."""


class DistError(FitError):
    """A distributed launch that cannot work (no rendezvous, too few devices, ranks that disagree)."""
