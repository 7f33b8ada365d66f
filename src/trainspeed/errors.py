"""Errors that reach the user as one line and exit status 2."""


def first_line(error: BaseException, limit: int = 200) -> str:
    """The first line of an error's message (at most `limit` characters), or its type's name."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:limit]


class UsageError(Exception):
    """Bad usage or bad input: the CLI prints the message on one line and exits 2."""


class FitError(ValueError):
    """Input that `trainspeed.fit` cannot train on; the message names the problem and the fix."""


class DistError(FitError):
    """A distributed launch that cannot work (no rendezvous, too few devices, ranks that disagree)."""
