"""Scheduling and eviction decisions on hand-built cases from the CoServe paper's figures."""
from __future__ import annotations

import torch

from inspector.coserve.online.policies import (
    FIFO,
    LRU,
    DependencyAware,
    EvictionView,
    MinMakespan,
    QueueOption,
    Resident,
    RoundRobin,
    get_policy,
)
from inspector.coserve.online.queue import MAX_BYPASS, ExecutorQueue
from inspector.coserve.online.request import Request, Route
from inspector.coserve.online.usage import ExpertUsage, RouteUse


def req(i: int, expert: str) -> Request:
    return Request(i, f"part{i}", Route((expert,)), torch.zeros(3, 8, 8), arrival=float(i))


def experts_in(queue: ExecutorQueue) -> list[tuple[str, int]]:
    return [(g.expert, len(g.requests)) for g in queue.groups]


def test_figure3_arranging_groups_requests_of_one_expert() -> None:
    # Requests 1 and j need expert 1, request i needs expert i in between.
    fcfs, grouped = ExecutorQueue(), ExecutorQueue()
    for r in [req(1, "E1"), req(2, "Ei"), req(3, "E1")]:
        fcfs.append(r)
        get_policy("coserve-em-ra").arranger.place(grouped, r, resident=False)
    assert experts_in(fcfs) == [("E1", 1), ("Ei", 1), ("E1", 1)]  # FCFS: expert 1 runs twice
    assert experts_in(grouped) == [("E1", 2), ("Ei", 1)]  # arranged: one switch serves both


def test_figure8_assign_minimises_makespan_then_added_latency() -> None:
    # Queue 3 dictates the makespan; queues 1 and 2 both keep it, queue 2 adds less.
    options = [QueueOption(0, 2.0, 1.5), QueueOption(1, 1.0, 1.0), QueueOption(2, 5.0, 0.2)]
    assert MinMakespan().choose(options) == 1


def test_assign_prefers_the_shorter_makespan_over_a_cheap_add() -> None:
    options = [QueueOption(0, 4.0, 0.1), QueueOption(1, 1.0, 2.0)]
    assert MinMakespan().choose(options) == 1  # 4.1 on queue 0 vs max(4.0, 3.0) on queue 1


def test_round_robin_ignores_estimates() -> None:
    rr = RoundRobin()
    options = [QueueOption(0, 9.0, 9.0), QueueOption(1, 0.0, 0.0)]
    assert [rr.choose(options) for _ in range(4)] == [0, 1, 0, 1]


def test_figure9_arrange_then_split_into_batches() -> None:
    queue = ExecutorQueue()
    for i, e in enumerate(["A", "B", "A", "C", "A", "B", "A", "A"]):
        queue.join(req(i, e))
    assert experts_in(queue) == [("A", 5), ("B", 2), ("C", 1)]
    first = queue.take_batch(limit=3)
    assert first is not None and first[0] == "A" and [r.id for r in first[1]] == [0, 2, 4]
    queue.finish(first[1])
    second = queue.take_batch(limit=3)
    assert second is not None and second[0] == "A" and [r.id for r in second[1]] == [6, 7]
    assert experts_in(queue) == [("B", 2), ("C", 1)]


def test_request_for_running_expert_goes_right_behind_it() -> None:
    queue = ExecutorQueue()
    for i, e in enumerate(["A", "B"]):
        queue.join(req(i, e))
    queue.take_batch(limit=8)  # A runs
    queue.join(req(5, "A"))
    assert experts_in(queue) == [("A", 1), ("B", 1)]


def test_resident_first_lane_is_bounded() -> None:
    queue = ExecutorQueue()
    arranger = get_policy("coserve").arranger
    arranger.place(queue, req(0, "cold"), resident=False)
    for i in range(MAX_BYPASS + 5):
        arranger.place(queue, req(100 + i, f"warm{i}"), resident=True)
    served = []
    while True:
        item = queue.take_batch(limit=8)
        if item is None:
            break
        served.append(item[0])
        queue.finish(item[1])
    assert served.index("cold") == MAX_BYPASS  # passed exactly MAX_BYPASS times, then served


def test_an_aged_out_group_is_cut_with_its_own_batch_limit() -> None:
    """The batch limit is the cut group's: when the aged-out main-lane group goes first, not the front head's."""
    queue = ExecutorQueue()
    arranger = get_policy("coserve").arranger
    for i in range(6):
        arranger.place(queue, req(i, "cold"), resident=False)
    for i in range(MAX_BYPASS + 1):
        arranger.place(queue, req(100 + i, f"warm{i}"), resident=True)
    limits = {"cold": 4}
    cuts = []
    while (item := queue.take_batch(lambda expert: limits.get(expert, 1))) is not None:
        cuts.append((item[0], len(item[1])))
        queue.finish(item[1])
    assert cuts[MAX_BYPASS] == ("cold", 4)  # with the head's limit (1) it would have been cut to one request
    assert ("cold", 2) in cuts[MAX_BYPASS + 1:]


def test_a_group_whose_expert_arrives_joins_the_front_lane_in_the_order_groups_formed() -> None:
    """A group's lane is chosen as it forms; once its expert is resident (a prefetch, the other executor's switch
    into the shared pool) it is served in turn, not passed by every later front group until its expert is evicted."""
    queue = ExecutorQueue()
    arranger = get_policy("coserve").arranger
    resident = {"warm1"}
    for i, (expert, now) in enumerate([("warm1", True), ("cold1", False), ("cold2", False), ("warm2", True)]):
        arranger.place(queue, req(i, expert), resident=now)
    assert experts_in(queue) == [("warm1", 1), ("warm2", 1), ("cold1", 1), ("cold2", 1)]
    arranger.refresh(queue, resident.__contains__)
    assert experts_in(queue) == [("warm1", 1), ("warm2", 1), ("cold1", 1), ("cold2", 1)]  # nothing arrived
    resident |= {"cold1", "warm2"}
    arranger.refresh(queue, resident.__contains__)
    assert experts_in(queue) == [("warm1", 1), ("cold1", 1), ("warm2", 1), ("cold2", 1)]  # formed before warm2
    assert [g.front for g in queue.groups] == [True, True, True, False]
    paper = get_policy("coserve-paper").arranger  # the paper's grouping has no lane to join
    plain = ExecutorQueue()
    for i, expert in enumerate(["a", "b", "c"]):
        paper.place(plain, req(i, expert), resident=False)
    paper.refresh(plain, {"c"}.__contains__)
    assert experts_in(plain) == [("a", 1), ("b", 1), ("c", 1)]


def _view(residents: list[Resident], usage: ExpertUsage, next_use: dict[str, int] | None = None) -> EvictionView:
    return EvictionView(residents, frozenset(r.name for r in residents), next_use or {}, usage)


def test_figure4_lru_evicts_by_history_coserve_by_probability() -> None:
    usage = ExpertUsage({"E1": 0.5, "E2": 0.4, "E3": 0.1})
    residents = [Resident("E2", 10, loaded_seq=1, used_seq=1), Resident("E3", 10, 2, 2),
                 Resident("E1", 10, 3, 3)]
    assert LRU().order(_view(residents, usage))[0] == "E2"
    assert DependencyAware().order(_view(residents, usage))[0] == "E3"


def test_fifo_evicts_first_loaded() -> None:
    usage = ExpertUsage({})
    residents = [Resident("a", 1, loaded_seq=5, used_seq=1), Resident("b", 1, loaded_seq=2, used_seq=9)]
    assert FIFO().order(_view(residents, usage)) == ["b", "a"]


def test_figure10_two_stage_eviction() -> None:
    # Detectors D1 (big) and D2 (small) follow classifiers; only D3's classifier c3 is resident.
    usage = ExpertUsage.from_routes([
        RouteUse(Route(("c1", "D1")), 1), RouteUse(Route(("c2", "D2")), 1), RouteUse(Route(("c3", "D3")), 1),
        RouteUse(Route(("c4",)), 10), RouteUse(Route(("c5",)), 1),
    ])
    residents = [Resident("D1", 300, 1, 1), Resident("D2", 100, 2, 2), Resident("D3", 200, 3, 3),
                 Resident("c3", 50, 4, 4), Resident("c4", 50, 5, 5), Resident("c5", 50, 6, 6)]
    order = DependencyAware().order(_view(residents, usage))
    # Stage 1: subsequent experts with no resident preliminary, largest first.
    assert order[:2] == ["D1", "D2"]
    # Stage 2: the rest by ascending usage probability.
    rest = order[2:]
    assert rest == sorted(rest, key=lambda e: usage.p(e))
    assert rest[-1] == "c4"


def test_queued_experts_are_evicted_last_furthest_first() -> None:
    usage = ExpertUsage({"a": 0.1, "b": 0.2, "c": 0.3})
    residents = [Resident("a", 1, 1, 1), Resident("b", 1, 2, 2), Resident("c", 1, 3, 3)]
    view = _view(residents, usage, next_use={"a": 0, "c": 4})
    assert DependencyAware(queue_aware=True).order(view) == ["b", "c", "a"]
    assert DependencyAware().order(view) == ["a", "b", "c"]  # the paper's: the queues play no part


def test_usage_probabilities_from_routes_and_counts() -> None:
    usage = ExpertUsage.from_routes([RouteUse(Route(("r", "det")), 8, pass_rate=0.5),
                                     RouteUse(Route(("u",)), 4)])
    assert abs(sum(usage.probability.values()) - 1) < 1e-9
    assert usage.p("r") == 8 / 16 and usage.p("det") == 4 / 16 and usage.p("u") == 4 / 16
    assert usage.preliminaries["det"] == {"r"} and not usage.is_subsequent("r")


def test_a_queues_length_is_read_from_another_thread_while_its_groups_change() -> None:
    """The dashboard's snapshot counts each executor's queue from the GUI thread while the engine's thread forms and
    serves groups: counting never fails because the groups changed under it (CI saw "deque mutated during
    iteration" there)."""
    import threading
    from collections import deque

    from inspector.coserve.online.queue import ExecutorQueue, Group

    q = ExecutorQueue()
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            for _ in range(50):
                q.groups.append(Group("e", deque([object()] * 3)))
            for _ in range(50):
                q.groups.popleft()
    worker = threading.Thread(target=churn)
    worker.start()
    try:
        counts = [len(q) for _ in range(20000)]
    finally:
        stop.set()
        worker.join()
    assert all(0 <= n <= 150 and n % 3 == 0 for n in counts)
