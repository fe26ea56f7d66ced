"""People for tests: users of a results database with a role and an API token, made through the product's own
user book (inspector/access), as `inspector user add` and `inspector user token` make them."""
from __future__ import annotations

from inspector.access.audit import AuditTrail
from inspector.access.identity import Identity
from inspector.access.users import UserBook
from inspector.results.store import ResultStore

ADMIN = Identity("test-admin", "admin", "the test suite")
PASSWORD = "correct horse battery"


def book(db_url: str) -> tuple[ResultStore, UserBook]:
    store = ResultStore(db_url)
    store.ready()
    return store, UserBook(store.engine, AuditTrail(store.engine, "test", "test"))


def person(db_url: str, name: str, role: str, days: float | None = 1.0) -> str:
    """Add `name` with `role` (and PASSWORD) unless there, and return a fresh token of theirs."""
    store, users = book(db_url)
    try:
        if name not in {u.name for u in users.users()}:
            users.add(ADMIN, name, role, PASSWORD)
        return users.issue(ADMIN, name, "test", days)
    finally:
        store.close()
