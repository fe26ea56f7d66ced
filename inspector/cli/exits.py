"""The command line's exit codes, kept from release to release (scripts and the line's supervisors read them).

    0  done
    1  the job ran and failed its purpose: a file missing, unreadable or malformed, a model that does not fit,
       an extra not installed, a run in which not one board was inspected
    2  usage: the command line is wrong (an unknown command, flag or name, a missing value, flags that cannot go
       together); nothing was done
    3  what a command defines as its own "no": a sign-in or role refused (user, audit, review), `board import`
       asking about packages its library lacks (nothing written), `llm plan`'s recipe does not fit

The line between 1 and 2: what can be told wrong from the command line alone, before any work (a policy or
condition that does not exist, --repeat 0), is usage; what is found wrong while doing the job (a rule set's line,
an image, a folder without the crops an expert needs) is a failure, with the reason on stderr.
"""
from __future__ import annotations

from ..errors import UnknownChoice

DONE, FAILED, USAGE, REFUSED = 0, 1, 2, 3


class UsageError(UnknownChoice):
    """A flag's value or a combination of flags refused after parsing: answered like argparse's own errors."""
