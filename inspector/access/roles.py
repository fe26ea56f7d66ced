"""The roles and what each may do. One table, read by every gate: the kiosk's routes, the model server, the
dashboard's buttons; so a role means the same thing wherever a person meets the line.

An operator watches and reviews; an engineer also changes the line (rules, memory, expert versions, camera);
an admin also manages users and tokens. `service` is the box's own token (the installer's token file): the
machine-to-machine routes (the model server's memory lease, the plant's reads of results), never a person's change.
"""
from __future__ import annotations

from enum import Enum


class Permission(str, Enum):
    VIEW = "view"  # results, crops, the audit trail over the API
    REVIEW = "review"  # an operator's word on a call
    LLM = "llm"  # the language model's /v1 routes
    RULES = "rules"  # apply or roll back a rule set
    ALLOCATION = "allocation"  # the memory split
    EXPERTS = "experts"  # serve, install or roll back an expert version
    CAMERA = "camera"  # camera settings
    USERS = "users"  # users and tokens
    LEDGER = "ledger"  # memory lent to a model beside the line (a process, not a person)


_OPERATOR = {Permission.VIEW, Permission.REVIEW, Permission.LLM}
_ENGINEER = _OPERATOR | {Permission.RULES, Permission.ALLOCATION, Permission.EXPERTS, Permission.CAMERA}
ROLES: dict[str, frozenset[Permission]] = {
    "operator": frozenset(_OPERATOR),
    "engineer": frozenset(_ENGINEER),
    "admin": frozenset(_ENGINEER | {Permission.USERS}),
    "service": frozenset({Permission.VIEW, Permission.LLM, Permission.LEDGER}),
}
PERSON_ROLES = ("operator", "engineer", "admin")  # what `inspector user add --role` takes


def allows(role: str, permission: Permission) -> bool:
    return permission in ROLES.get(role, frozenset())


def check_role(role: str) -> str:
    if role not in PERSON_ROLES:
        raise ValueError(f"no role {role!r}: a user is one of {', '.join(PERSON_ROLES)}")
    return role
