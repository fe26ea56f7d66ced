"""A line's neighbours, for tests, `inspector bench-io` and commissioning: the machine before the box (it hands
boards in, each with a fresh BoardId GUID, a barcode and a FailedBoard flag) and the machine after it (it takes
every board and keeps what it was told).

Both are the real lane ends (lane.py), so a box that talks to them talks Hermes, not to a fake.
"""
from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from .lane import Giver, Handed, Say, Taker
from .messages import BoardAvailable, BoardQuality, SubBoard


@dataclass(frozen=True)
class BoardPlan:
    """What the upstream peer hands in: `boards` boards, every `failed_every`-th already failed upstream."""

    boards: int
    failed_every: int = 0  # 0: none failed upstream
    barcode_prefix: str = "UP"
    product: str | None = None
    seed: int = 0
    barcodes: tuple[str, ...] = ()  # the boards' barcodes in order (default: the prefix and a running number)
    sub_boards: tuple[SubBoard, ...] = ()  # what upstream says of each board of a panel (every board handed in)
    products: tuple[str, ...] = ()  # the boards' product types in order (default: `product` for every board)


def planned_boards(plan: BoardPlan, created_by: str) -> list[BoardAvailable]:
    for given, what in ((plan.barcodes, "barcodes"), (plan.products, "product types")):
        if given and len(given) != plan.boards:
            raise ValueError(f"{len(given)} {what} for {plan.boards} boards: give one per board")
    rng = random.Random(plan.seed)
    out = []
    for i in range(plan.boards):
        barcode = plan.barcodes[i] if plan.barcodes else f"{plan.barcode_prefix}{i + 1:06d}"
        failed = plan.failed_every > 0 and (i + 1) % plan.failed_every == 0
        out.append(BoardAvailable(
            str(uuid.UUID(int=rng.getrandbits(128), version=4)), created_by,
            BoardQuality.FAILED if failed else BoardQuality.GOOD,
            ProductTypeId=plan.products[i] if plan.products else plan.product,
            TopBarcode=barcode, Length=100.0, Width=80.0, Thickness=1.6, sub_boards=plan.sub_boards))
    return out


class UpstreamPeer:
    """The machine before the box: a giver that hands in the planned boards, in order."""

    def __init__(self, listen: tuple[str, int], plan: BoardPlan, machine_id: str = "upstream-peer",
                 say: Say = lambda _m: None) -> None:
        self.boards = planned_boards(plan, machine_id)
        self.giver = Giver(listen[0], listen[1], machine_id, say=say)
        self.address = self.giver.address

    def start(self) -> UpstreamPeer:
        self.giver.start()
        for board in self.boards:
            self.giver.give(board)
        return self

    def stop(self) -> None:
        self.giver.stop()

    @property
    def handed(self) -> list[Handed]:
        return list(self.giver.handed)


class DownstreamPeer:
    """The machine after the box: a taker that takes every board the box hands on."""

    def __init__(self, connect: tuple[str, int], machine_id: str = "downstream-peer", say: Say = lambda _m: None
                 ) -> None:
        self.taker = Taker(connect[0], connect[1], machine_id, say=say)

    def start(self) -> DownstreamPeer:
        self.taker.start()
        return self

    def stop(self) -> None:
        self.taker.stop()

    @property
    def taken(self) -> list[Handed]:
        return list(self.taker.taken)
