"""Where a test serves an expert so that the line calls its parts each way, whatever the float bits of its batches."""
from __future__ import annotations


def widest_gap(scores: list[float]) -> float:
    """A point in the widest gap between sorted scores near their median (the middle half): the line's batches differ
    from a test's offline ones in the last float bits, so a point at a score (or a median between equal scores) can
    call every part one way there; a point in a gap wider than that noise calls each part as offline."""
    best = sorted(scores)
    cut = max(range(max(1, len(best) // 4), 3 * len(best) // 4 + 1), key=lambda i: best[i] - best[i - 1])
    assert best[cut] - best[cut - 1] > 1e-4, f"no gap between these scores to serve at: {best}"
    return (best[cut - 1] + best[cut]) / 2
