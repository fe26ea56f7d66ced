"""Where a language model's memory comes from when an inspection line shares the box: a loan.

A model never sizes its own budget beside a line. Whoever owns the box's
memory lends it: the kiosk over its ledger API (`--llm-mb` there, a lease
kept by `service/lease.py`), or the dashboard from memory it set aside for
its in-process model (`inspector gui --llm-mb`). The loan covers the expert
pool and the model's fixed weights (what `inspector llm serve --ledger` asks
for), and becomes the budget the pool's ledger opens in, so the model cannot
take more than it was lent; closing the loan gives the bytes back.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..runtime.grants import GrantBook, GrantRefused, MiB
from ..runtime.memory import DeviceBudget
from .calibration import Calibration
from .checkpoint import MoECheckpoint
from .engine import pool_plan
from .policies import MoEPolicy

if TYPE_CHECKING:
    from .service.lease import Lease

FIXED = "fixed weights"  # the ledger for the model's non-expert weights, opened first in a loan's budget


@dataclass
class Loan:
    budget: DeviceBudget  # the lent bytes: the pool's ledger opens in it
    source: str  # who lent them, for the operator
    release: Callable[[], None]
    lease: Lease | None = None  # a kiosk's loan: whether the grant is still held (a server reports it)

    def close(self) -> None:
        self.release()


Borrow = Callable[[int], Loan]  # bytes wanted -> a loan, or GrantRefused/GrantError naming what is free


def model_bytes(ckpt: MoECheckpoint, policy: MoEPolicy, cache_ratio: float,
                calibration: Calibration | None) -> tuple[int, int]:
    """(expert pool with its read buffers, non-expert weights) in bytes: what a loan must cover."""
    return pool_plan(ckpt, policy, cache_ratio, calibration)[1], ckpt.non_expert_bytes


def borrow_for(ckpt: MoECheckpoint, policy: MoEPolicy, cache_ratio: float, calibration: Calibration | None,
               borrow: Borrow) -> Loan:
    """A loan for this model, its fixed weights already booked in it (the pool's ledger is left to the load)."""
    pool, fixed = model_bytes(ckpt, policy, cache_ratio, calibration)
    loan = borrow(pool + fixed)
    loan.budget.open(FIXED, fixed)
    return loan


class SetAside:
    """Memory a process keeps apart for the model it runs itself, lent like the kiosk lends its own."""

    def __init__(self, device_key: str, nbytes: int, flag: str = "--llm-mb") -> None:
        self.book = GrantBook(DeviceBudget(f"{device_key} (set aside for a model)", nbytes), lease_s=float("inf"))
        self.flag = flag

    @property
    def free(self) -> int:
        return self.book.budget.total - self.book.budget.allocated

    def __call__(self, nbytes: int) -> Loan:
        total = self.book.budget.total
        if total <= 0:
            raise GrantRefused(f"no memory is set aside for a language model here; the model needs "
                               f"{nbytes / MiB:.1f} MiB: start with {self.flag} {nbytes / MiB:.0f} or more, or "
                               "lower the cache ratio")
        try:
            grant = self.book.grant("the in-process model", nbytes)
        except GrantRefused:
            raise GrantRefused(f"the model needs {nbytes / MiB:.1f} MiB; {self.free / MiB:.1f} of the "
                               f"{total / MiB:.1f} MiB set aside are free. Lower the cache ratio, or set more "
                               f"aside ({self.flag})") from None
        return Loan(DeviceBudget(f"{self.book.budget.device_key}, grant {grant.id[:8]}", nbytes),
                    f"{nbytes / MiB:.1f} of the {total / MiB:.1f} MiB set aside",
                    lambda: self.book.release(grant.id))


def from_kiosk(url: str, token: str | None, log: Callable[[str], None] = lambda m: None,
               holder: str = "the dashboard's language model") -> Borrow:
    """Loans from a kiosk's ledger on a lease, renewed until the loan is closed."""
    from .service.lease import Lease

    def borrow(nbytes: int) -> Loan:
        lease = Lease(url, token, nbytes, log, holder=holder)
        return Loan(DeviceBudget(f"{lease.device} (lent by {url})", nbytes),
                    f"{nbytes / MiB:.1f} MiB lent by the kiosk at {url}", lease.close, lease)

    return borrow
