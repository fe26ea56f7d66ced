"""Errors that say the caller's words were wrong, shared by every room (it imports nothing).

A name or option that is not one of the known ones (a policy, a condition, a backend) is the caller's mistake,
whether it came from a flag, the config file or a request: the command line answers it as a usage error (exit 2)
where a file that could not be read or a job that failed is exit 1 (`inspector.cli.exits`).
"""
from __future__ import annotations


class UnknownChoice(ValueError):
    """Not one of the names or options this accepts; the message lists those it does."""
