"""Faults injected into the real kiosk process: kill -9, database outages, a torn spool, a full disk, bad
images, hostile rule files and unauthenticated edits. Every test checks that each accepted image ends with
exactly one result, and adds its row to the fault table printed at the end of the session."""
from __future__ import annotations

import json
import os
import random
import socket
import time
from datetime import datetime, timezone
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.ingest.synthetic import render_board
from inspector.results.records import BoardRecord
from inspector.results.spool import Spool
from inspector.results.store import ResultStore, sqlite_url

from .conftest import DEMO_RULES
from .faults import KioskProcess, drop, http, inbox_empty, record, wait_until
from .people import person
from .services import Postgres
from .test_routing_rules import GOOD

KILLS = 12  # each a kiosk started (about 5 s) and killed at a random moment; 20 took two minutes of the suite
FAST_RETRY = ("--db-retry-max-s", "1")


def setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    rules = tmp_path / "mini.yaml"
    rules.write_text(GOOD, encoding="utf-8")
    inbox, data = tmp_path / "inbox", tmp_path / "data"
    inbox.mkdir()
    data.mkdir()
    return rules, inbox, data


def settled(kiosk: KioskProcess, inbox: Path) -> bool:
    """Every image taken, every result stored: nothing in the folder, the spool, memory or the engine."""
    if not inbox_empty(inbox):
        return False
    s = kiosk.status()
    r = s["results"]
    return not (r["spooled"] or r["pending"] or s["in_flight"] or s["ingest"]["depth"])


def test_kill_9_at_any_moment_loses_nothing_and_stores_nothing_twice(demo, tmp_path: Path) -> None:
    root, zoo = demo
    rules, inbox, data = setup(tmp_path)
    kiosk = KioskProcess(root, zoo.root, rules, inbox, data)
    rng = random.Random(9)
    names: list[str] = []
    caught_working = 0
    try:
        for k in range(KILLS):
            batch = [f"K{k:02d}-{i}" for i in range(3)]
            drop(inbox, batch, seed=k)
            names += batch
            kiosk.start()
            time.sleep(rng.uniform(0.0, 1.2))  # reading, inspecting, storing, moving: anywhere
            caught_working += not inbox_empty(inbox)
            kiosk.kill9()
        kiosk.start()
        assert wait_until(lambda: settled(kiosk, inbox), 300), kiosk.tail()
        assert kiosk.stop() == 0, kiosk.tail()
    finally:
        kiosk.close()
    store = ResultStore(sqlite_url(data / "results.sqlite"))
    row = record(f"kill -9 at a random moment ({caught_working} mid-work)", KILLS, names, store)
    assert (row.stored, row.duplicated, row.lost) == (len(names), 0, 0), row
    assert sorted(p.stem for p in (inbox / "inspected").glob("*.png")) == sorted(names)
    assert caught_working >= KILLS // 4  # the kills really landed while boards were in the works


def test_database_down_at_start_and_mid_run(demo, tmp_path: Path) -> None:
    root, zoo = demo
    rules, inbox, data = setup(tmp_path)
    pg = Postgres()
    url = pg.create_db("faults")
    pg.outage()
    kiosk = KioskProcess(root, zoo.root, rules, inbox, data, *FAST_RETRY, env={"INSPECTOR_DB_URL": url})
    try:
        kiosk.start()  # the database is down: the line starts anyway and spools from the first board
        first = [f"D{i}" for i in range(6)]
        drop(inbox, first, seed=1)
        assert wait_until(lambda: inbox_empty(inbox) and kiosk.status()["results"]["spooled"] == 6, 120), kiosk.tail()
        code, body = kiosk.health()
        assert code == 200 and body["status"] == "degraded" and "spooled" in body["reasons"][0]
        pg.start()
        assert wait_until(lambda: settled(kiosk, inbox), 120), kiosk.status()["results"]
        store = ResultStore(url)
        at_start = record("database down at start", 1, first, store)
        # mid-run: the server dies under load and comes back
        second = [f"M{i}" for i in range(8)]
        drop(inbox, second[:4], seed=2)
        time.sleep(0.3)
        pg.outage()
        drop(inbox, second[4:], seed=3)
        assert wait_until(lambda: inbox_empty(inbox) and kiosk.status()["results"]["spooled"] > 0, 120)
        pg.start()
        assert wait_until(lambda: settled(kiosk, inbox), 120), kiosk.status()["results"]
        assert kiosk.stop() == 0, kiosk.tail()
    finally:
        kiosk.close()
        store = ResultStore(url)
        mid = record("database outage mid-run", 1, second, store)
        store.close()
        pg.stop()
    assert (at_start.duplicated, at_start.lost) == (0, 0) and (mid.duplicated, mid.lost) == (0, 0)
    assert at_start.stored == len(first) and mid.stored == len(second)


def test_a_full_disk_stops_ingest_turns_health_critical_and_loses_nothing(demo, tmp_path: Path) -> None:
    """ENOSPC from the kernel (the spool is /dev/full) while the database is away: the results cannot go
    anywhere, so nothing is acknowledged, no image moves, health is critical; kill -9 then, and after the
    disk and the database are back every image has its one result."""
    root, zoo = demo
    rules, inbox, data = setup(tmp_path)
    later = tmp_path / "db-later"  # the database's folder does not exist yet: it cannot be opened
    (data / "spool.jsonl").symlink_to("/dev/full")
    env = {"INSPECTOR_DB_URL": sqlite_url(later / "results.sqlite")}
    kiosk = KioskProcess(root, zoo.root, rules, inbox, data, *FAST_RETRY, env=env)
    names = [f"F{i}" for i in range(5)]
    try:
        kiosk.start()
        drop(inbox, names, seed=4)
        got = wait_until(lambda: (h := kiosk.health())[0] == 503 and h[1]["status"] == "critical" and h, 120)
        assert got and "disk full" in got[1]["reasons"][0], kiosk.health()
        time.sleep(1.0)
        assert sorted(p.stem for p in inbox.glob("*.png")) == names  # nothing was safe, so nothing moved
        kiosk.kill9()
        (data / "spool.jsonl").unlink()  # space is back
        later.mkdir()  # and so is the database
        kiosk.start()
        assert wait_until(lambda: settled(kiosk, inbox), 120), kiosk.tail()
        assert kiosk.stop() == 0
    finally:
        kiosk.close()
    row = record("disk full (ENOSPC), then kill -9", 1, names, ResultStore(env["INSPECTOR_DB_URL"]))
    assert (row.stored, row.duplicated, row.lost) == (len(names), 0, 0), row


def test_a_torn_spool_is_set_aside_and_everything_else_stored(demo, tmp_path: Path) -> None:
    """A power cut mid-append: the spool ends in half a line. That board's image was never acknowledged, so it
    is still in the folder; the torn line goes to the dead letters and the board is inspected again."""
    root, zoo = demo
    rules, inbox, data = setup(tmp_path)
    now = datetime.now(timezone.utc)
    spooled = [BoardRecord(f"S{i}", "mini", "v", now, now) for i in range(3)]
    Spool(data / "spool.jsonl").append(spooled)
    torn = json.dumps(BoardRecord("S3", "mini", "v", now, now).to_json())
    with (data / "spool.jsonl").open("a") as f:
        f.write(torn[: len(torn) // 2])
    drop(inbox, ["S3", "N0", "N1"], seed=5)
    kiosk = KioskProcess(root, zoo.root, rules, inbox, data)
    try:
        kiosk.start()
        assert wait_until(lambda: settled(kiosk, inbox), 120), kiosk.tail()
        assert kiosk.status()["results"]["dead_letters"] == 1
        assert kiosk.stop() == 0
    finally:
        kiosk.close()
    store = ResultStore(sqlite_url(data / "results.sqlite"))
    row = record("torn spool line (power cut mid-append)", 1, ["S0", "S1", "S2", "S3", "N0", "N1"], store)
    assert (row.stored, row.duplicated, row.lost) == (6, 0, 0), row
    dead = [json.loads(ln) for ln in (data / "dead-letter.jsonl").read_text().splitlines()]
    assert len(dead) == 1 and dead[0]["raw"] == torn[: len(torn) // 2]


def test_bad_images_are_board_level_errors_and_the_line_goes_on(demo, tmp_path: Path) -> None:
    root, zoo = demo
    rules, inbox, data = setup(tmp_path)
    good = render_board(DEMO_RULES, "x", np.random.default_rng(0)).image
    jpeg = cv2.imencode(".jpg", good)[1].tobytes()
    png = cv2.imencode(".png", good)[1].tobytes()
    huge = cv2.imencode(".png", np.zeros((400, 400, 3), np.uint8))[1].tobytes()
    bad = {"zero.png": b"", "cutj.jpg": jpeg[: len(jpeg) // 2], "cutp.png": png[:-30], "text.png": b"hello",
           "huge.png": huge}
    kiosk = KioskProcess(root, zoo.root, rules, inbox, data, "--max-pixels", str(good.shape[0] * good.shape[1] * 2))
    try:
        kiosk.start()
        drop(inbox, ["G0"], seed=6)
        for name, data_ in bad.items():
            (inbox / f".{name}").write_bytes(data_)
            (inbox / f".{name}").rename(inbox / name)
        drop(inbox, ["G1", "G2"], seed=7)
        assert wait_until(lambda: settled(kiosk, inbox), 120), kiosk.tail()
        assert kiosk.stop() == 0
    finally:
        kiosk.close()
    store = ResultStore(sqlite_url(data / "results.sqlite"))
    names = ["G0", "G1", "G2", *(Path(n).stem for n in bad)]
    row = record("bad images (empty, truncated, not an image, too big)", len(bad), names, store)
    assert (row.stored, row.duplicated, row.lost) == (len(names), 0, 0), row
    boards = {i.board_serial: i for i in store.inspections()}
    why = {"zero": "empty file", "cutj": "truncated JPEG", "cutp": "truncated PNG", "text": "not an image",
           "huge": "over the limit"}
    for stem, text in why.items():
        assert boards[stem].verdict == "error" and text in boards[stem].error, (stem, boards[stem].error)
    assert all(boards[g].error is None and boards[g].parts for g in ("G0", "G1", "G2"))


def test_hostile_rule_files_and_unauthenticated_edits_change_nothing(demo, tmp_path: Path) -> None:
    root, zoo = demo
    rules, inbox, data = setup(tmp_path)
    token_file = tmp_path / "api-token"
    service_token = "k" * 40
    token_file.write_text(service_token)
    os.chmod(token_file, 0o600)
    data.mkdir(parents=True, exist_ok=True)
    token = person(sqlite_url(data / "results.sqlite"), "eve", "engineer")
    kiosk = KioskProcess(root, zoo.root, rules, inbox, data, "--token-file", str(token_file))
    names: list[str] = []
    try:
        kiosk.start()
        version = kiosk.status()["line"]["ruleset_version"]
        # edits over HTTP: no token, a wrong one, a right one with a broken file: refused, nothing written
        edited = GOOD.replace("threshold: 0.5", "threshold: 0.45")
        assert http(kiosk.url + "/rules", edited.encode())[0] == 401
        assert http(kiosk.url + "/rules", edited.encode(), token="x" * 40)[0] == 401
        assert http(kiosk.url + "/rules", edited.encode(), token=service_token)[0] == 403  # the box's token: no edits
        code, body = http(kiosk.url + "/rules", GOOD.replace("shape: resistor", "shape: [").encode(), token=token)
        assert code == 422 and "mini.yaml" in body["error"] and rules.read_text() == GOOD
        code, body = http(kiosk.url + "/allocation", b'{"device_mb": 40, "expert_pool_mb": 90}', token=token)
        assert code == 422 and not (data / "allocation.json").exists()
        # hostile files written in place: not UTF-8, then YAML of the wrong shapes; the watcher refuses both
        rules.write_bytes(GOOD.encode().replace(b"board:", b"b\xff\xfeoard:"))
        assert wait_until(lambda: kiosk.status()["rules"]["refused"] >= 2, 30)
        assert "not UTF-8" in kiosk.status()["rules"]["last_error"]
        rules.write_text("components: {a: {b: [[[]]]}}\nboard: [1, {x: 2}]\n")
        assert wait_until(lambda: kiosk.status()["rules"]["refused"] >= 3, 30)
        s = kiosk.status()
        assert s["line"]["ruleset_version"] == version and s["rules"]["watcher_alive"]
        names += ["H0", "H1"]
        drop(inbox, names, seed=8)
        assert wait_until(lambda: settled(kiosk, inbox), 60)
        # an authorised, valid edit: validated, written atomically, applied
        code, body = http(kiosk.url + "/rules", edited.encode(), token=token)
        assert code == 200 and body["version"] != version and rules.read_text() == edited
        assert kiosk.status()["line"]["ruleset_version"] == body["version"]
        assert kiosk.health()[1]["status"] == "ok"
        names += ["H2"]
        drop(inbox, ["H2"], seed=9)
        assert wait_until(lambda: settled(kiosk, inbox), 60)
        assert kiosk.stop() == 0
    finally:
        kiosk.close()
    store = ResultStore(sqlite_url(data / "results.sqlite"))
    record("hostile rule files (not UTF-8, wrong shapes)", 2, names, store)
    row = record("unauthenticated or invalid API edits", 4, names, store)
    assert (row.stored, row.duplicated, row.lost) == (3, 0, 0)


def test_the_endpoints_bound_their_threads_and_time_out_slow_clients(tmp_path: Path) -> None:
    from prometheus_client.registry import CollectorRegistry

    from inspector.access.roles import Permission
    from inspector.endpoint import read_token
    from inspector.kiosk.http import SOCKET_TIMEOUT_S, WORKERS, Endpoints

    from .services import free_port

    port = free_port()
    endpoints = Endpoints(f"127.0.0.1:{port}", CollectorRegistry(), lambda: {"state": "running"},
                          lambda: {"status": "ok", "reasons": []},
                          posts={"/x": (Permission.RULES, lambda call: {"ok": True})})
    endpoints.start()
    try:
        assert http(f"http://127.0.0.1:{port}/x", b"{}")[0] == 401  # neither users nor a token: no changes at all
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(WORKERS + 4)]  # say nothing
        time.sleep(0.3)
        code, _ = http(f"http://127.0.0.1:{port}/health", timeout=2)
        assert code == 503  # every worker is taken by a silent client: refused at once, not queued
        time.sleep(SOCKET_TIMEOUT_S + 1)  # the silent clients time out and free their workers
        assert http(f"http://127.0.0.1:{port}/health")[0] == 200
        for s in idle:
            s.close()
    finally:
        endpoints.stop()
    loose = tmp_path / "token"
    loose.write_text("t" * 32)
    os.chmod(loose, 0o644)
    with pytest.raises(ValueError, match="chmod 600"):
        read_token(loose)


def test_the_kiosks_own_disk_faults_are_answered_naming_the_file_not_taken_for_a_client_gone() -> None:
    """A handler's OSError is the kiosk's (a full disk, a folder its user may not write, the line too slow), not the
    client's: answered with the file and what to do, where the kiosk used to drop the connection; a refusal by role
    (a PermissionError of our own, no errno) stays 403, and the server goes on serving."""
    import errno

    from prometheus_client.registry import CollectorRegistry

    from inspector.kiosk.http import Endpoints

    from .services import free_port

    def raises(exc: BaseException):  # noqa: ANN202
        def handler(*_args: object) -> dict:
            raise exc
        return handler

    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/var/lib/inspector/allocation.json")
    denied = PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/etc/inspector/rules/line.yaml")
    gone = FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), "/var/lib/inspector/crops/a.png")
    port = free_port()
    endpoints = Endpoints(f"127.0.0.1:{port}", CollectorRegistry(), lambda: {"state": "running"},
                          lambda: {"status": "ok", "reasons": []}, reads={"/lost": raises(gone)},
                          posts={"/full": (None, raises(full)), "/denied": (None, raises(denied)),
                                 "/refused": (None, raises(PermissionError("otto (operator) may not change rules"))),
                                 "/slow": (None, raises(TimeoutError("the line did not take the swap within 60 s")))})
    endpoints.start()
    base = f"http://127.0.0.1:{port}"
    try:
        code, body = http(base + "/full", b"{}")
        assert code == 507 and "/var/lib/inspector/allocation.json" in body["error"], body
        assert "No space left" in body["error"] and "nothing changed" in body["error"]
        code, body = http(base + "/denied", b"{}")
        assert code == 500 and "may not use /etc/inspector/rules/line.yaml" in body["error"], body  # not the caller's
        code, body = http(base + "/refused", b"{}")
        assert code == 403 and "may not change rules" in body["error"]
        code, body = http(base + "/slow", b"{}")
        assert code == 503 and "within 60 s" in body["error"] and "nothing changed" in body["error"], body
        code, body = http(base + "/lost")
        assert code == 500 and "crops/a.png" in body["error"] and "nothing changed" not in body["error"], body
        assert http(base + "/health")[0] == 200
    finally:
        endpoints.stop()
