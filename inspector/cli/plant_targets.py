"""Which line each named kiosk serves: a rollout's targets, in the order the plant asked for."""
from __future__ import annotations


def targets_of(kiosks: list[str], lines: list[str] | None):  # noqa: ANN201 - list[app.rollout.Target]
    from ..app.kiosk_client import KioskClient
    from ..app.rollout import Target
    from ..endpoint import EndpointError

    if not kiosks:
        raise ValueError("name the plant's kiosks: --kiosks http://line1-box:9108,http://line2-box:9108")
    found: dict[str, Target] = {}
    for url in kiosks:
        try:
            line = KioskClient(url).status().get("line") or {}
        except EndpointError as exc:
            raise ValueError(f"kiosk {url} does not answer ({exc.message}); start it, or leave it out of --kiosks") \
                from None
        target = Target(str(line.get("line")), str(line.get("station")), url.rstrip("/"))
        if target.line in found:
            raise ValueError(f"kiosks {found[target.line].kiosk} and {url} both say they are line {target.line}; "
                             "give each box its own --line")
        found[target.line] = target
    if lines is None:
        return list(found.values())
    missing = [name for name in lines if name not in found]
    if missing:
        raise ValueError(f"no kiosk of --kiosks is line {', '.join(missing)}; the kiosks are lines "
                         f"{', '.join(found)}")
    return [found[name] for name in lines]
