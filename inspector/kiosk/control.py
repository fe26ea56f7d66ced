"""What the kiosk lets an authorised client change: its rule set and its memory split.

Each verb validates before anything is written or applied, and answers what it did, so the dashboard
attached to a kiosk never writes the kiosk's files itself and never needs a path from it.
- rules: the text is parsed and checked against the zoo, then the watched file is replaced atomically,
  then the line takes it (app/rules_watch.py `submit`); a refused edit leaves the disk as it was.
- allocation: a new pool/batch split over the same device and executors applies live; anything else is
  saved to `allocation.json` in the data directory and applies at the kiosk's next start.
- reviews: an operator's word on a stored part's call (results/reviews.py), checked against its verdict.
- experts: a version of one expert's weights into service at a board boundary, or back (app/expert_swap.py);
  or its weights at another operating point (a detector's threshold); or a release of the plant's, read from the
  results database and checked against its hash (`zoo rollout`).

Each verb gets the Call (body, the checked Identity, the stated reason); a verb refuses before it changes anything
when the audit trail cannot be written, and records who changed what, before and after, once it is done
(app/changes.py). A review is stored under the signed-in name, whatever the body says.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ..access.audit import Change
from ..access.identity import Identity
from ..app.allocation import Allocation, reallocate_live
from ..app.changes import ChangeLog
from ..app.expert_swap import expert_versions, install_release, operate_live, swap_live
from ..app.rules_watch import RulesWatcher
from ..app.service import LineService
from ..app.verdict import classes_of
from ..experts.operating import said
from ..experts.versions import VersionError
from ..results.releases import ReleaseError
from ..results.reviews import RatesCache, ReviewRequest, record_review, review_rates
from ..results.store import StoreUnavailable
from ..routing.rules import RuleSet, decode_rules
from ..runtime.diskio import write_atomically
from .http import Call, HttpError, json_object

ALLOCATION_FILE = "allocation.json"
AUDIT_HEAD_S = 15.0


def saved_allocation(data_dir: Path) -> Allocation | None:
    """The allocation an operator saved for the next start, if any (ValueError when the file is damaged)."""
    path = data_dir / ALLOCATION_FILE
    if not path.is_file():
        return None
    try:
        return parse_allocation(path.read_bytes())
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}; fix or delete the file") from None


def parse_allocation(body: bytes) -> Allocation:
    try:
        doc = json.loads(body)
        device, pool = float(doc["device_mb"]), float(doc["expert_pool_mb"])
        executors = doc.get("executors")
        executors = None if executors is None else int(executors)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"an allocation is JSON {{\"device_mb\": N, \"expert_pool_mb\": N, \"executors\": N or "
                         f"null}} ({type(exc).__name__}: {exc})") from None
    if not 0 < pool < device:
        raise ValueError(f"the expert pool ({pool:g} MiB) must be more than 0 and less than the device "
                         f"({device:g} MiB)")
    if executors is not None and executors < 1:
        raise ValueError(f"executors must be at least 1, got {executors}")
    return Allocation(device, pool, executors)


class Control:
    def __init__(self, service: LineService, rules: RulesWatcher, data_dir: Path,
                 say: Callable[[str], None] = lambda _m: None) -> None:
        self.service, self.rules, self.data_dir, self.say = service, rules, data_dir, say
        self.rates = RatesCache(lambda: review_rates(service.store, service.line.config.scope))
        config = service.line.config
        self.log = ChangeLog(service.store, config.line, config.station, say)
        rules.witness = lambda kind, who, origin, old, new: self.log.rules(Identity(who, "-", origin), kind, old, new)
        self._head: tuple[float, dict[str, Any] | None] | None = None

    def audit_head(self) -> dict[str, Any] | None:
        """The trail's rows and head for /status and the metrics, read at most every AUDIT_HEAD_S."""
        now = time.monotonic()
        if self._head is None or now - self._head[0] > AUDIT_HEAD_S:
            try:
                rows, sha = self.log.trail.head()
                self._head = (now, {"rows": rows, "head": sha})
            except Exception:  # noqa: BLE001 - the database away: no figure rather than a wrong one
                self._head = (now, None)
        return self._head[1]

    def ready(self) -> None:
        try:
            self.log.ready()
        except StoreUnavailable as exc:
            raise HttpError(503, str(exc)) from None

    def review(self, call: Call) -> dict[str, Any]:
        req = replace(ReviewRequest.parse(call.body), reviewer=call.who.name)
        self.ready()
        try:
            stored = record_review(self.service.store, req, classes_of(self.service.line.zoo))
        except StoreUnavailable as exc:
            raise HttpError(503, f"{exc}; the review was not stored, send it again") from None
        self.rates.invalidate()
        return {**stored, **self.log.record(call.who, Change("review", f"{req.inspection_id}/{req.ref}",
                                                              stored.get("before"), req.audited(), call.reason))}

    def review_document(self) -> dict[str, Any]:
        """Per component type: parts, flagged, confirmed, false calls, escapes and the two rates."""
        return {"component_types": [r.to_json() for r in self.rates.get().values()]}

    def experts_document(self) -> dict[str, Any]:
        return expert_versions(self.service.line.zoo)

    def swap_expert(self, call: Call) -> dict[str, Any]:
        doc = json_object(call.body, 'JSON {"expert": NAME, "weights_sha256": HASH (8+ hex digits)} or '
                                     '{"expert": NAME, "rollback": true}')
        if not isinstance(doc.get("expert"), str):
            raise ValueError('name the expert: {"expert": NAME, ...}')
        rollback = bool(doc.get("rollback"))
        sha = doc.get("weights_sha256")
        if not rollback and not isinstance(sha, str):
            raise ValueError('name the version: {"expert": NAME, "weights_sha256": HASH} (or "rollback": true)')
        self.ready()
        done = swap_live(self.service.line, doc["expert"], None if rollback else sha, rollback,
                         force=doc.get("force") is True)  # a swap that timed out: 503 (kiosk/http.py served)
        self.say(f"expert {done['expert']} now serves {done['to'][:12]} (was {str(done['from'])[:12]})"
                 f"{', a rollback' if rollback else ''}, over the API")
        change = Change("expert.rollback" if rollback else "expert.swap", done["expert"],
                        {"weights_sha256": done["from"], "operating": done["operating_from"]},
                        {"weights_sha256": done["to"], "operating": done["operating"]}, call.reason)
        return {"applied": True, **done, **self.log.record(call.who, change)}

    def operate_expert(self, call: Call) -> dict[str, Any]:
        """POST /experts/operating: an expert's operating point (a detector's threshold, a classifier's good margin)
        from the next board on, its weights unchanged; recorded as `expert.threshold`."""
        doc = json_object(call.body, 'JSON {"expert": NAME, "operating": {"threshold": T} or {"good_margin": M}}')
        point = doc.get("operating")
        if not isinstance(doc.get("expert"), str) or not isinstance(point, dict) or not point:
            raise ValueError('name the expert and its point: {"expert": NAME, "operating": {"threshold": 0.5}} (a '
                             'detector) or {"operating": {"good_margin": 2.0}} (a classifier)')
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in point.values()):
            raise ValueError(f"an operating point's values are numbers: {json.dumps(point)}")
        self.ready()
        done = operate_live(self.service.line, doc["expert"], {k: float(v) for k, v in point.items()})
        self.say(f"expert {done['expert']} now calls at {said(done['operating'])} (was "
                 f"{said(done['operating_from'])}), over the API")
        change = Change("expert.threshold", done["expert"], done["operating_from"], done["operating"], call.reason)
        return {"applied": True, **done, **self.log.record(call.who, change)}

    def install_expert(self, call: Call) -> dict[str, Any]:
        """POST /experts/install: serve a release of the plant's (from the results database, its hash checked)."""
        doc = json_object(call.body, 'JSON {"expert": NAME, "weights_sha256": HASH (8+ hex digits)}')
        if not isinstance(doc.get("expert"), str) or not isinstance(doc.get("weights_sha256"), str):
            raise ValueError('name the expert and the release: {"expert": NAME, "weights_sha256": HASH}')
        self.ready()
        try:
            done = install_release(self.service.line, self.service.store, doc["expert"], doc["weights_sha256"])
        except (ReleaseError, VersionError) as exc:
            raise ValueError(str(exc)) from None
        except StoreUnavailable as exc:
            raise HttpError(503, str(exc)) from None
        self.say(f"expert {done['expert']} now serves the plant's release {done['to'][:12]} "
                 f"(was {str(done['from'])[:12]}), over the API")
        change = Change("expert.install", done["expert"], {"weights_sha256": done["from"]},
                        {"weights_sha256": done["to"]}, call.reason)
        return {"applied": True, **done, **self.log.record(call.who, change)}

    def approve_alternate(self, call: Call) -> dict[str, Any]:
        """A part the line flagged, found to be an approved second source's: the crop this kiosk kept of it becomes
        an approved window of that part (app/board_approve.py), applied as a change of the rule set."""
        from ..app.board_approve import apply_approval, prepare, window_from_crop
        from .results_api import kept_crop

        doc = json_object(call.body, 'JSON {"inspection_id": UUID, "ref": "U4"}: a flagged part whose crop was kept')
        uuid, ref, make = doc.get("inspection_id"), doc.get("ref"), doc.get("make")
        if not isinstance(uuid, str) or not isinstance(ref, str):
            raise ValueError('name the part: {"inspection_id": UUID, "ref": "U4"}')
        if make is not None and not isinstance(make, str):
            raise ValueError('"make" is the approved make\'s name, a text (its part number), or left out')
        if self.rules.path is None:
            raise HttpError(409, "the running rule set was not read from a file: there is no rule file to approve in")
        crop = kept_crop(self.service.store, self.service.line.config.scope, self.service.crops.root, uuid, ref)
        approval = prepare(self.rules.path, {ref: window_from_crop(self.service.line.rules, ref, crop)}, uuid[:8],
                           make)
        out = self.rules_change(call, "rules.alternate", lambda: apply_approval(approval, self.rules.submit),
                                 f"approved {ref} from board {uuid} in")
        return {**out, "ref": ref, "file": approval.approved[0].file.name, "already": approval.approved[0].already}

    def rules_document(self) -> dict[str, Any]:
        """The running set and the text it came from (what the dashboard's editor shows)."""
        running = self.service.line.rules
        history = self.rules.state.history
        return {"recipe": running.recipe, "version": running.version, "name": Path(running.source).name,
                "text": history[-1].text if history else None, "editable": self.rules.path is not None}

    def submit_rules(self, call: Call) -> dict[str, Any]:
        text = decode_rules(call.body, "the posted rule set")
        return self.rules_change(call, "rules.apply", lambda: self.rules.submit(text), "applied")

    def rollback(self, call: Call) -> dict[str, Any]:
        try:
            index = int(json.loads(call.body)["index"])
        except (ValueError, KeyError, TypeError):
            raise ValueError('a rollback is JSON {"index": N}, N a position in /status rules.history') from None
        return self.rules_change(call, "rules.rollback", lambda: self.rules.rollback(index), "rolled back to")

    def rules_change(self, call: Call, kind: str, change: Callable[[], RuleSet], said: str) -> dict[str, Any]:
        try:
            rules, recorded = self.log.rules_change(call.who, kind, lambda: self.service.line.rules, change,
                                                    call.reason)
        except StoreUnavailable as exc:
            raise HttpError(503, str(exc)) from None
        self.say(f"rules {said} over the API by {call.who.name}: {rules.recipe} {rules.version}")
        return {"applied": True, "recipe": rules.recipe, "version": rules.version,
                "notes": self.service.scale_notes, **recorded}  # what the line said of the set, where it was edited

    def allocation(self, call: Call) -> dict[str, Any]:
        new = parse_allocation(call.body)
        line = self.service.line
        self.ready()
        running = line.config
        before = Allocation.of(running)
        change = Change("allocation", f"{line.config.line}/{line.config.station}", asdict(before), asdict(new),
                        call.reason)
        if new.live_over(before):
            batch_mb = reallocate_live(line, new)
            try:
                self._save(new)
            except OSError:  # not kept for the next start: the pool goes back, so the line and the file agree
                reallocate_live(line, before)
                line.config = running
                raise
            self.say(f"allocation applied live over the API by {call.who.name}: pool {new.expert_pool_mb:g} MiB")
            return {"applied": "live", "batch_mb_per_executor": batch_mb, **self.log.record(call.who, change)}
        self._save(new)
        return {"applied": "restart", "saved": ALLOCATION_FILE,
                "note": "a new device total or executor count applies at the kiosk's next start "
                        "(sudo systemctl restart inspector-kiosk)", **self.log.record(call.who, change)}

    def _save(self, new: Allocation) -> None:
        write_atomically(self.data_dir / ALLOCATION_FILE, json.dumps(asdict(new)).encode())
