"""A board as the MQTT message, shaped after IPC-CFX's UnitsInspected, with our record beside it.

IPC-2591 (CFX) is the electronics-assembly convention for machine-to-MES messages; its
`CFX.Production.TestAndInspection.UnitsInspected` carries one inspected unit's overall result, an
inspection per component and the defects found. We send that shape as JSON over MQTT (not the CFX AMQP
transport, and not validated against the CFX SDK), plus:
- `SchemaVersion` (ours; 3 since a board-level error is CFX's `Error` and an x-out a `Skipped` unit, 2 called the
  error `Aborted`, which CFX keeps for an operator's abort, and listed no x-out; 1 was the bare record), so a
  subscriber can tell the layouts apart;
- `UniqueID` and `MessageBody.TransactionId`: the board's inspection id, unique in the database, so a
  subscriber drops a message QoS 1 delivered twice;
- `Record`: the board as the results database stores it (every field, for subscribers of version 1).
A panel (its rule set's `panel:`, routing/panel.py) is one inspection with one unit per board in `InspectedUnits`,
each with its position (`UnitPositionNumber` 1..N), its own result and its parts; parts on the panel's own frame are
a unit at position 0. An x-out (not inspected: marked skip upstream or on its bad-mark pad) is a unit too, `Skipped`
(CFX 1.4's result for a bad mark) with no inspections. Each unit carries its board's own serial where the board has
one (its code read, or its NOREAD; routing/panel.py `codes:`), else the panel's. An inspection of a part compared with
an approved make (`inspector board approve`) says which in its `Comments`. A defect's component is named by its
reference and its `PartNumber`: the BOM's part number where the rule set has one (`part_numbers:`, written by
`board import --bom`), else its component type.
The line's other events (a recipe activated, a fault and its end, a board rejected) take CFX's names and the same
envelope, each with its own `UniqueID`.
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .records import BoardRecord, PartRecord
from .units import failed_positions, unit_serial, units, verdict_of

SCHEMA_VERSION = 3
MESSAGE_NAME = "CFX.Production.TestAndInspection.UnitsInspected"
RESULT = {"pass": "Passed", "fail": "Failed", "error": "Error"}  # CFX TestResult (Aborted: by an operator)
SKIPPED = "Skipped"  # CFX 1.4: a unit not inspected for its (virtual) bad mark: an x-out


def _id(inspection_id: str, *names: str) -> str:
    """A stable id for a part of a message: a re-sent board gets the same ids."""
    return str(uuid.uuid5(uuid.UUID(inspection_id) if _is_uuid(inspection_id) else uuid.NAMESPACE_URL,
                          "/".join((inspection_id, *names))))


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _inspection(board: BoardRecord, part: PartRecord) -> dict[str, Any]:
    component = {"ReferenceDesignator": part.ref, "UnitPosition": None,
                 "PartNumber": part.part_number or part.component_type}
    defects = []
    if part.verdict == "fail":
        defects.append({
            "UniqueIdentifier": _id(board.inspection_id, part.ref, "defect"),
            "DefectCode": part.defect_class, "DefectCategory": "Component",
            "Description": f"{part.defect_class} on {part.ref} ({part.component_type})",
            "Comments": None, "ComponentOfInterest": component,
            "Priority": 1, "ConfidenceLevel": None if part.score is None else round(100.0 * part.score, 2),
        })
    return {"UniqueIdentifier": _id(board.inspection_id, part.ref), "InspectionName": f"INSPECT_{part.ref}",
            "InspectionStartTime": board.started_at.isoformat(), "InspectionEndTime": board.finished_at.isoformat(),
            "TestProcedure": part.expert, "Comments": _comments(part), "Result": RESULT[part.verdict],
            "Error": part.error,
            "DefectsFound": defects, "Symptoms": None, "Measurements": []}


def reject_positions(board: BoardRecord) -> list[int]:
    """The units a reject of `board` names: those that did not pass (all of them where the board as a whole failed:
    an error), or every one where none failed (a board the line controller rejects though it passed: its code
    unread)."""
    failed = failed_positions(board.panel_boards, board.parts, board.error, board.panel_skipped)
    return failed or [k for k, _parts in units(board.panel_boards, board.parts, board.panel_skipped)]


def _comments(part: PartRecord) -> str | None:
    """What an MES reader of the inspection needs beside its result: the approved make it was judged against."""
    return None if part.alternate is None else f"compared with the approved make {part.alternate}"


def units_inspected(board: BoardRecord) -> dict[str, Any]:
    """The MQTT message for one stored board (SCHEMA_VERSION)."""
    body = {
        "TransactionId": board.inspection_id,
        "InspectionMethod": "AOI",
        "SamplingInformation": {"SamplingMethod": "NoSampling", "LotSize": None, "SampleSize": None},
        "Inspector": None,  # a machine's call; an operator's review is a later message of its own
        "InspectedUnits": sorted([{
            "UnitIdentifier": board.unit_serial(position), "UnitPositionNumber": position,
            "OverallResult": RESULT[verdict_of(parts, board.error)],
            "Error": board.error,
            "Inspections": [_inspection(board, p) for p in parts],
        } for position, parts in units(board.panel_boards, board.parts, board.panel_skipped)] + [{
            "UnitIdentifier": board.unit_serial(position), "UnitPositionNumber": position, "OverallResult": SKIPPED,
            "Error": None, "Inspections": [],
        } for position in (board.panel_skipped if board.panel_boards else ())],
            key=lambda unit: unit["UnitPositionNumber"]),
    }
    return {"MessageName": MESSAGE_NAME, "SchemaVersion": SCHEMA_VERSION, "UniqueID": board.inspection_id,
            "TimeStamp": board.finished_at.isoformat(), "Source": f"inspector.{board.line}.{board.station}",
            "MessageBody": body, "Record": board.to_json()}


# -- the line's other factory events (topic <prefix>/<line>/<station>/event) --------------------------------------
RECIPE_ACTIVATED = "CFX.Production.RecipeActivated"
FAULT_OCCURRED = "CFX.ResourcePerformance.FaultOccurred"
FAULT_CLEARED = "CFX.ResourcePerformance.FaultCleared"
UNITS_DISQUALIFIED = "CFX.Production.UnitsDisqualified"


def envelope(name: str, key: str, line: str, station: str, body: dict[str, Any], at: str) -> dict[str, Any]:
    """A CFX-shaped message: its name, our schema version, its key (`UniqueID`: what a subscriber deduplicates on,
    since QoS 1 and a restart's re-send deliver at least once), when, from where, and the body."""
    return {"MessageName": name, "SchemaVersion": SCHEMA_VERSION, "UniqueID": key, "TimeStamp": at,
            "Source": f"inspector.{line}.{station}", "MessageBody": body}


def recipe_activated(line: str, station: str, recipe: str, version: str, at: str) -> dict[str, Any]:
    key = str(uuid.uuid5(uuid.NAMESPACE_URL, f"recipe/{line}/{station}/{recipe}/{version}/{at}"))
    return envelope(RECIPE_ACTIVATED, key, line, station, {"Lane": 1, "Recipe": {"Name": recipe, "Revision": version}},
                    at)


def fault(line: str, station: str, occurrence: str, code: str, description: str, at: str,
          cleared: bool = False, severity: str = "Error") -> dict[str, Any]:
    """A fault (`code`: CameraLost, ResultsDatabaseUnreachable, ...) and, with `cleared`, its end, one occurrence id
    for both; `severity` Warning where the line goes on inspecting, Error where it cannot."""
    body = {"FaultOccurrenceId": occurrence, "Operator": None} if cleared else {
        "Fault": {"FaultOccurrenceId": occurrence, "FaultCode": code, "Severity": severity, "Description": description,
                  "Lane": 1}}
    return envelope(FAULT_CLEARED if cleared else FAULT_OCCURRED, f"{occurrence}/{'cleared' if cleared else 'on'}",
                    line, station, body, at)


def units_disqualified(inspection_id: str, serial: str, line: str, station: str, reason: str, at: str,
                       positions: Sequence[int] = (1,), serials: Mapping[int, str] | None = None) -> dict[str, Any]:
    """A board the box rejected (its verdict, or the line controller's fail-safe): one per inspection; of a panel,
    the positions of its boards that did not pass (`reject_positions`), each under its own serial where `serials`
    has one (BoardRecord.unit_serial), else the panel's."""
    serials = serials or {}
    body = {"TransactionId": inspection_id, "Reason": reason,
            "DisqualifiedUnits": [{"UnitIdentifier": unit_serial(serials, k, serial), "PositionNumber": k}
                                  for k in positions]}
    return envelope(UNITS_DISQUALIFIED, f"{inspection_id}/reject", line, station, body, at)
