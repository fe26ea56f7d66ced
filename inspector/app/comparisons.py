"""What each component type's experts read: the live crop alone, or the crop beside the golden board's window.

A part is one request with one image (a tensor the classifier reads and, when it passes, its detector), so the two
must read the same thing; the line composes a type's crops with the golden board where its classifier was taught so
(ingest/golden.py).
"""
from __future__ import annotations

from ..experts.zoo import Zoo
from ..routing.rules import RuleSet


def reads(zoo: Zoo, expert: str) -> str | None:
    """The comparison `expert` was taught on (composite, colour, matched), or None: the live crop alone, or an
    expert the zoo lacks or cannot load (the line's other checks name those)."""
    if expert not in zoo.entries or expert in zoo.unavailable:
        return None
    return getattr(zoo.architecture(expert), "reference", None)


def check_comparisons(rules: RuleSet, zoo: Zoo) -> None:
    """A part is one request with one image, so a type's classifier and detector must read the same thing: both
    the live crop alone, or both the crop beside the golden board's window, composed alike."""
    def said(expert: str, kind: str | None) -> str:
        return (f"{expert}, which reads the live crop alone" if kind is None else
                f"{expert}, which compares with the golden board ({kind})")
    for c in rules.components:
        if not c.detector or any(e not in zoo.entries or e in zoo.unavailable for e in (c.classifier, c.detector)):
            continue
        first, then = reads(zoo, c.classifier), reads(zoo, c.detector)
        if first != then:
            raise ValueError(f"component type {c.name} routes to {said(c.classifier, first)}, and then to "
                             f"{said(c.detector, then)}: a part is one request with one image; teach the detector "
                             "as its classifier was (`zoo train --new --kind detector`, with or without --reference)"
                             + (" or route the type to the golden comparison alone" if first else ""))


def golden_types(rules: RuleSet, zoo: Zoo) -> dict[str, str]:
    """The component types whose classifier compares each crop with the golden board's (ingest/golden.py), each
    with the kind of comparison it was taught on (composite, colour); their detectors read the same composite
    (check_comparisons)."""
    return {c.name: kind for c in rules.components if (kind := reads(zoo, c.classifier)) is not None}
