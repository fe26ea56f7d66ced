"""The two ways the results database fails a write, which the writer treats differently, and why a release may
not run on a database's schema."""
from __future__ import annotations


class StoreUnavailable(RuntimeError):
    """The database cannot be reached or written now; the writer keeps results and retries."""


class StoreRejected(RuntimeError):
    """The database refused these rows (a value too long, a constraint); retrying will not help."""


class SchemaTooNew(StoreUnavailable):
    """The database was migrated by a newer release whose schema this release's code cannot run on."""


class SchemaNotReady(StoreUnavailable):
    """A shared database whose schema is missing or older than this release needs: `inspector db upgrade` (a
    deploy step) must run first. The line spools meanwhile and stores everything once it has."""
