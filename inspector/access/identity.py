"""Who a request or a click comes from, and the two ways a gate says no."""
from __future__ import annotations

from dataclasses import dataclass, field

from .roles import Permission, allows


@dataclass(frozen=True)
class Identity:
    """A signed-in person (or the box's service token): the name and role the audit trail records, and where the
    request came from ("10.1.2.3 via the kiosk API", "dashboard on line-box-2", "cli: root on line-box-2")."""

    name: str
    role: str
    origin: str
    token_key: str | None = field(default=None, compare=False)  # the person's token that made the request, if any

    def may(self, permission: Permission) -> bool:
        return allows(self.role, permission)

    def require(self, permission: Permission) -> None:
        if not self.may(permission):
            raise Forbidden(f"{self.name} ({self.role}) may not change {permission.value}: ask an engineer or an "
                            f"admin (inspector user list shows who)" if permission is not Permission.LEDGER else
                            f"{self.name} ({self.role}) may not use the memory ledger: it takes the box's service "
                            f"token (the installer's token file)")


class Unauthenticated(PermissionError):
    """No credential, or one that is wrong, expired or revoked (HTTP 401)."""


class Forbidden(PermissionError):
    """A known identity whose role does not allow this (HTTP 403)."""
