"""Who may change the line, and the record of who did (inspector/access), with real parts: argon2 hashes and
tokens in a real SQLite file, the hash chain tampered with by hand, real kiosk and model-server processes asked
every mutating route by every kind of caller over real TLS, and real clients refusing a wrong certificate."""
from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from sqlalchemy import text

from inspector.access.audit import GENESIS, AuditTrail, Change
from inspector.access.gate import Gate
from inspector.access.identity import Forbidden, Identity, Unauthenticated
from inspector.access.roles import ROLES, Permission
from inspector.access.tls import ClientTrust, TlsError, make_self_signed
from inspector.access.users import UserBook
from inspector.cli import main
from inspector.results.store import ResultStore, sqlite_url

from .faults import KioskProcess, http, wait_until
from .people import ADMIN, PASSWORD, person
from .services import free_port

REPO = Path(__file__).resolve().parents[1]


def _book(tmp_path: Path) -> tuple[ResultStore, UserBook, AuditTrail]:
    store = ResultStore(sqlite_url(tmp_path / "r.sqlite"))
    store.ready()
    trail = AuditTrail(store.engine, "line-1", "aoi-1")
    return store, UserBook(store.engine, trail), trail


def test_passwords_are_argon2_and_tokens_are_hashed_expire_revoke_and_stop_with_their_user(tmp_path: Path) -> None:
    store, users, trail = _book(tmp_path)
    users.add(ADMIN, "olga", "operator", PASSWORD)
    with store.engine.connect() as c:
        stored = c.execute(text("SELECT password_hash FROM users WHERE name = 'olga'")).scalar()
    assert stored.startswith("$argon2id$") and PASSWORD not in stored
    with pytest.raises(ValueError, match="exists already"):
        users.add(ADMIN, "olga", "operator", PASSWORD)
    with pytest.raises(ValueError, match="no role 'root'"):
        users.add(ADMIN, "rob", "root", PASSWORD)
    with pytest.raises(ValueError, match="at least 8"):
        users.add(ADMIN, "rob", "operator", "short")
    assert users.sign_in("olga", PASSWORD, "here").role == "operator"
    with pytest.raises(Unauthenticated, match="wrong name or password"):
        users.sign_in("olga", "not the password", "here")
    with pytest.raises(Unauthenticated, match="wrong name or password"):
        users.sign_in("nobody", PASSWORD, "here")
    token = users.issue(ADMIN, "olga", "api", days=1)
    with store.engine.connect() as c:
        assert token not in str(list(c.execute(text("SELECT * FROM api_tokens"))))  # only its hash is kept
    assert users.holder(token) == ("olga", "operator")
    with pytest.raises(Unauthenticated, match="unknown token"):
        users.holder(token[:-4] + "AAAA")
    expired = users.issue(ADMIN, "olga", "old", days=-1 / 24)
    with pytest.raises(Unauthenticated, match="expired"):
        users.holder(expired)
    key = token.split("_")[1]
    users.revoke(ADMIN, key, "left the team")
    with pytest.raises(Unauthenticated, match="revoked"):
        users.holder(token)
    live = users.issue(ADMIN, "olga", "new", days=None)
    users.disable(ADMIN, "olga", "left the company")
    with pytest.raises(Unauthenticated, match="disabled"):
        users.holder(live)
    with pytest.raises(Unauthenticated, match="disabled"):
        users.sign_in("olga", PASSWORD, "here")
    # the gate: the service token acts as `service`; a cached person's token; roles decide
    gate = Gate(users, "s" * 32, cache_s=0)
    assert gate.check("Bearer " + "s" * 32, "x", Permission.LEDGER).role == "service"
    with pytest.raises(Forbidden):
        gate.check("Bearer " + "s" * 32, "x", Permission.RULES)
    users.add(ADMIN, "emil", "engineer", PASSWORD)
    emil = users.issue(ADMIN, "emil", "api")
    assert gate.check(f"Bearer {emil}", "x", Permission.RULES).name == "emil"
    with pytest.raises(Forbidden, match="users"):
        gate.check(f"Bearer {emil}", "x", Permission.USERS)
    with pytest.raises(Unauthenticated, match="no credential"):
        gate.check(None, "x", Permission.VIEW)
    # guessing: after five refusals in a quarter of an hour a name is refused without a try, even the right password
    users.add(ADMIN, "gus", "operator", PASSWORD)
    for _ in range(5):
        with pytest.raises(Unauthenticated, match="wrong name or password"):
            users.sign_in("gus", "guess-guess", "10.9.9.9 via the kiosk API")
    with pytest.raises(Unauthenticated, match="5 failed sign-ins of gus"):
        users.sign_in("gus", PASSWORD, "here")
    assert users.sign_in("emil", PASSWORD, "here").name == "emil"  # others are not locked out
    users.set_role(ADMIN, "emil", "operator", "moved to the line")
    users.set_password(ADMIN, "emil", "a new password")
    assert users.sign_in("emil", "a new password", "here").role == "operator"
    kinds = [e.kind for e in trail.events(newest_first=False)]
    role = trail.events("user.role")[0]
    assert (json.loads(role.before), json.loads(role.after)) == ({"role": "engineer"}, {"role": "operator"})
    assert "a new password" not in str([(e.before, e.after) for e in trail.events("user.password")])
    for kind in ("user.add", "sign_in", "sign_in.refused", "token.issue", "token.revoke", "user.disable",
                 "user.role", "user.password"):
        assert kind in kinds, kind
    assert trail.verify().intact


def test_the_cli_manages_users_only_as_an_admin_and_the_first_admin_bootstraps(tmp_path: Path, capsys,
                                                                                 monkeypatch) -> None:
    import io

    db = ["--db", sqlite_url(tmp_path / "r.sqlite")]
    monkeypatch.setattr("sys.stdin", io.StringIO("first-admin-pw\n"))
    assert main(["user", "add", "ada", "--role", "admin", "--password-stdin", *db]) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("operator-pw-1\n"))
    assert main(["user", "add", "bob", "--role", "operator", "--password-stdin", *db]) == 3  # not without an admin
    assert "needs an admin" in capsys.readouterr().err
    monkeypatch.setenv("INSPECTOR_PASSWORD", "operator-pw-1")
    monkeypatch.setattr("sys.stdin", io.StringIO("operator-pw-1\n"))
    assert main(["user", "add", "bob", "--role", "operator", "--password-stdin", "--as", "ada", *db]) == 3
    assert "wrong name or password" in capsys.readouterr().err
    monkeypatch.setenv("INSPECTOR_PASSWORD", "first-admin-pw")
    monkeypatch.setattr("sys.stdin", io.StringIO("operator-pw-1\n"))
    assert main(["user", "add", "bob", "--role", "operator", "--password-stdin", "--as", "ada", *db]) == 0
    monkeypatch.setenv("INSPECTOR_PASSWORD", "operator-pw-1")
    assert main(["user", "token", "ada", "--as", "bob", *db]) == 3  # an operator manages nobody
    assert "may not change users" in capsys.readouterr().err
    monkeypatch.setenv("INSPECTOR_PASSWORD", "first-admin-pw")
    out = tmp_path / "bob.token"
    assert main(["user", "token", "bob", "--as", "ada", "--days", "30", "--out", str(out), *db]) == 0
    assert out.stat().st_mode & 0o777 == 0o600 and out.read_text().startswith("insp_")
    capsys.readouterr()
    assert main(["user", "list", *db]) == 0
    listing = capsys.readouterr().out
    assert "ada" in listing and "bob                  operator  active         1" in listing
    assert main(["audit", "list", *db]) == 0
    trail = capsys.readouterr().out
    assert "system:" in trail and "user.add" in trail and "token.issue" in trail and "sign_in.refused" in trail


def test_the_trail_is_chained_and_verify_finds_an_edited_a_deleted_and_an_inserted_row(tmp_path: Path,
                                                                                      capsys) -> None:
    store, _, trail = _book(tmp_path)
    who = Identity("erin", "engineer", "10.0.0.7 via the kiosk API")
    for i in range(6):
        trail.record(who, Change("allocation", "line-1/aoi-1", {"expert_pool_mb": 30 + i},
                                 {"expert_pool_mb": 31 + i}, f"step {i}"))
    verdict = trail.verify()
    assert verdict.intact and verdict.rows == 6 and verdict.head != GENESIS
    db = ["--db", sqlite_url(tmp_path / "r.sqlite")]
    assert main(["audit", "verify", *db]) == 0 and "intact" in capsys.readouterr().out
    # someone with the database's password edits what a row says
    with store.engine.begin() as c:
        c.execute(text("UPDATE audit_events SET after = '{\"expert_pool_mb\": 99}' WHERE id = 3"))
    assert [(b.row_id, "edited" in b.why) for b in trail.verify().broken] == [(3, True)]
    assert main(["audit", "verify", *db]) == 1
    out = capsys.readouterr().out
    assert "BROKEN at row 3" in out and "tampered" in out
    with store.engine.begin() as c:  # put it back as it was: the chain holds again
        c.execute(text("UPDATE audit_events SET after = '{\"expert_pool_mb\": 33}' WHERE id = 3"))
    assert trail.verify().intact
    with store.engine.begin() as c:  # a row deleted: the next one links to nothing before it
        c.execute(text("DELETE FROM audit_events WHERE id = 4"))
    assert [b.row_id for b in trail.verify().broken] == [5]
    with store.engine.begin() as c:  # a row slipped in with a made-up hash
        c.execute(text("INSERT INTO audit_events (id, at, actor, role, origin, line, station, kind, subject, "
                       "prev_sha256, sha256) VALUES (4, '2026-01-01 00:00:00', 'mallory', 'admin', 'x', 'l', 's', "
                       "'review', 'x', 'f00d', 'beef')"))
    assert {b.row_id for b in trail.verify().broken} == {4, 5}
    csv_out = tmp_path / "audit.csv"
    assert main(["audit", "export", "--out", str(csv_out), *db]) == 0
    assert csv_out.read_text().count("\n") == 7 and "sha256" in csv_out.read_text().splitlines()[0]


def test_two_processes_appending_at_once_keep_one_chain(tmp_path: Path) -> None:
    """Two writers on one database: the unique previous hash makes the slower one append again on the new head."""
    store, _, trail = _book(tmp_path)
    script = ("import sys; from inspector.access.audit import AuditTrail, Change; "
              "from inspector.access.identity import Identity; from inspector.results.store import ResultStore; "
              "s = ResultStore(sys.argv[1]); s.ready(); t = AuditTrail(s.engine, 'l', sys.argv[2]); "
              "[t.record(Identity(sys.argv[2], 'engineer', 'p'), Change('review', str(i))) for i in range(40)]")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", script, sqlite_url(tmp_path / "r.sqlite"), name], env=env)
             for name in ("a", "b")]
    assert [p.wait(120) for p in procs] == [0, 0]
    verdict = trail.verify()
    assert verdict.intact and verdict.rows == 80


# -- every mutating route x every caller, over TLS, on the real processes ----------------------------------------

# what an allowed call sends: each is refused by the route's own validation (or harmless), so the matrix changes
# nothing and every cell is independent; 401/403 is the gate saying no, anything else got past it
KIOSK_POSTS: dict[str, tuple[Permission, bytes]] = {
    "/rules": (Permission.RULES, b"components: [not a rule set"),
    "/rules/rollback": (Permission.RULES, b'{"index": 99}'),
    "/rules/alternates": (Permission.RULES, b'{"inspection_id": "no-such-board", "ref": "R1"}'),
    "/boards/install": (Permission.RULES, b""),  # no package: refused for its body once past the gate
    "/boards/next": (Permission.RULES, b'{"board": "no-such-board"}'),
    "/boards/serve": (Permission.RULES, b'{"board": "no-such-board"}'),
    "/boards/profile": (Permission.RULES, b'{"board": "no-such-board"}'),
    "/boards/remove": (Permission.RULES, b'{"board": "no-such-board"}'),
    "/allocation": (Permission.ALLOCATION, b'{"device_mb": 1, "expert_pool_mb": 5}'),
    "/reviews": (Permission.REVIEW, b'{"inspection_id": "no-such-board", "ref": "R1", "call": "escape"}'),
    "/experts/swap": (Permission.EXPERTS, b'{"expert": "no-such-expert", "weights_sha256": "00000000"}'),
    "/experts/operating": (Permission.EXPERTS, b'{"expert": "no-such-expert", "operating": {"threshold": 0.5}}'),
    "/experts/install": (Permission.EXPERTS, b'{"expert": "no-such-expert", "weights_sha256": "00000000"}'),
    "/camera/settings": (Permission.CAMERA, b'{"ExposureTime": 900}'),
    "/ledger/grant": (Permission.LEDGER, b'{"holder": "matrix", "bytes": 1000000000000000}'),
    "/ledger/renew": (Permission.LEDGER, b'{"grant": "no-such-grant"}'),
    "/ledger/release": (Permission.LEDGER, b'{"grant": "no-such-grant"}'),
}
KIOSK_GETS: dict[str, Permission] = {"/results/latest": Permission.VIEW, "/audit/events": Permission.VIEW}
CALLERS = ("no token", "expired", "revoked", "operator", "engineer", "admin", "service")


def _callers(db_url: str, service_token: str) -> dict[str, str | None]:
    store, users = ResultStore(db_url), None
    store.ready()
    users = UserBook(store.engine, AuditTrail(store.engine))
    tokens: dict[str, str | None] = {"no token": None, "service": service_token}
    for role in ("operator", "engineer", "admin"):
        tokens[role] = person(db_url, f"matrix-{role}", role)
    tokens["expired"] = users.issue(ADMIN, "matrix-admin", "expired", days=-1 / 24)
    revoked = users.issue(ADMIN, "matrix-admin", "revoked")
    users.revoke(ADMIN, revoked.split("_")[1])
    tokens["revoked"] = revoked
    store.close()
    return tokens


def _expected(caller: str, permission: Permission) -> str:
    if caller in ("no token", "expired", "revoked"):
        return "refused"
    return "allowed" if permission in ROLES[caller] else "refused"


def _matrix(rows: dict[str, dict[str, int]], expect: dict[str, dict[str, str]], title: str) -> tuple[int, int]:
    """Print the route x caller table (the answer's code, * where unexpected); (unexpected allows, refusals)."""
    allows = refusals = 0
    print(f"\n{title}\n{'route':<22}" + "".join(f"{c:>10}" for c in CALLERS))
    for route, codes in rows.items():
        cells = []
        for caller in CALLERS:
            code = codes[caller]
            got = "refused" if code in (401, 403) else "allowed"
            bad = got != expect[route][caller]
            allows += bad and got == "allowed"
            refusals += bad and got == "refused"
            cells.append(f"{code}{'*' if bad else ' '}")
        print(f"{route:<22}" + "".join(f"{c:>10}" for c in cells))
    print(f"unexpected allows: {allows}, unexpected refusals: {refusals} (401/403: refused by the gate; any other "
          f"code: past it, answered by the route)")
    return allows, refusals


def test_every_mutating_route_answers_every_caller_as_its_role_says(demo, tiny_llm: Path, tmp_path: Path,
                                                                    monkeypatch) -> None:
    from .test_faults import setup

    root, zoo = demo
    cert, key, fp = make_self_signed(tmp_path / "tls", ["line-box"])
    monkeypatch.setenv("INSPECTOR_TLS_PIN", fp)  # the clients here pin the kiosk's certificate
    rules, inbox, data = setup(tmp_path)
    db = sqlite_url(data / "results.sqlite")
    service_file = tmp_path / "api-token"
    service_file.write_text("svc-" + "s" * 36)
    service_file.chmod(0o600)
    tokens = _callers(db, service_file.read_text())
    kiosk = KioskProcess(root, zoo.root, rules, inbox, data, "--token-file", str(service_file), "--llm-mb", "64",
                         "--tls-cert", str(cert), "--tls-key", str(key))
    assert kiosk.url.startswith("https://")
    rows: dict[str, dict[str, int]] = {}
    expect: dict[str, dict[str, str]] = {}
    try:
        kiosk.start()
        for route, (permission, body) in KIOSK_POSTS.items():
            rows[route] = {c: http(kiosk.url + route, body, tokens[c])[0] for c in CALLERS}
            expect[route] = {c: _expected(c, permission) for c in CALLERS}
        for route, permission in KIOSK_GETS.items():
            rows["GET " + route] = {c: http(kiosk.url + route, None, tokens[c])[0] for c in CALLERS}
            expect["GET " + route] = {c: _expected(c, permission) for c in CALLERS}
        # a change the kiosk cannot keep (its allocation file a folder): the pool goes back, nothing recorded
        (data / "allocation.json").mkdir()
        def capacities() -> list[int]:
            return [p["capacity_bytes"] for p in kiosk.status()["engine"]["pools"]]

        pools = capacities()
        code, done = http(kiosk.url + "/allocation", b'{"device_mb": 40, "expert_pool_mb": 24}', tokens["engineer"])
        assert code == 500 and str(data / "allocation.json") in done["error"], done
        assert "nothing changed" in done["error"] and capacities() == pools
        (data / "allocation.json").rmdir()
        # the routes a person's change takes, for real: in the trail under their name, with before and after
        code, done = http(kiosk.url + "/allocation", b'{"device_mb": 40, "expert_pool_mb": 24}', tokens["engineer"])
        assert code == 200 and done["applied"] == "live" and "audit" in done, done
        edited = rules.read_text().replace("threshold: 0.5", "threshold: 0.45")
        code, done = http(kiosk.url + "/rules", edited.encode(), tokens["engineer"])
        assert code == 200 and done["notes"] == [], done  # what the line says of the set: nothing of the demo's
        rules.write_text(edited.replace("threshold: 0.45", "threshold: 0.4"))  # an edit on disk: recorded too
        assert wait_until(lambda: kiosk.status()["rules"]["applied"] >= 2, 30)
        code, done = http(kiosk.url + "/rules/rollback", b'{"index": 0}', tokens["admin"])
        assert code == 200, done
        code, signed = http(kiosk.url + "/auth/sign-in", json.dumps({"user": "matrix-operator",
                                                                    "password": PASSWORD}).encode())
        assert code == 200 and signed["role"] == "operator" and signed["token"].startswith("insp_")
        assert http(kiosk.url + "/auth/sign-in", b'{"user": "matrix-operator", "password": "nope"}')[0] == 401
        assert http(kiosk.url + "/allocation", b'{"device_mb": 40, "expert_pool_mb": 26}', signed["token"])[0] == 403
        assert http(kiosk.url + "/auth/sign-out", b"{}", signed["token"])[0] == 200  # the session ends: revoked
        assert http(kiosk.url + "/audit/events", None, signed["token"])[0] == 401
        code, trail = http(kiosk.url + "/audit/events?limit=100", None, tokens["operator"])
        assert code == 200
        # the chain's end leaves the box: Prometheus keeps the rows and the head hash a cut could not take back
        from inspector.endpoint import urlopen

        def metrics() -> str:
            with urlopen(kiosk.url + "/metrics", timeout=5) as r:
                return r.read().decode()

        def audit_rows() -> float:
            lines = [ln for ln in metrics().splitlines() if ln.startswith("inspector_audit_rows{")]
            return float(lines[0].split()[-1]) if lines else -1.0

        assert wait_until(lambda: audit_rows() >= len(trail["events"]), 40)  # read at most every 15 s
        assert "inspector_audit_head_info{" in metrics()
        # the dashboard attached over TLS (the certificate pinned): its boards panel's list and a refused change
        from ui.attached import AttachedBackend

        attached = AttachedBackend(kiosk.url, token=tokens["operator"])
        try:
            listed = attached.boards()
            assert listed["boards"] == [] and listed["configured"]["rules"] == rules.name
            with pytest.raises(RuntimeError, match="nobody is signed in"):
                attached.serve_board("none-such")
            attached.sign_in("matrix-engineer", PASSWORD)  # a person's change, over TLS, in their name
            with pytest.raises(ValueError, match="no board none-such is installed on this kiosk"):
                attached.serve_board("none-such", "over TLS")  # the kiosk's own answer, through TLS
        finally:
            attached.close()
        assert kiosk.stop() == 0
    finally:
        kiosk.close()
    allows, refusals = _matrix(rows, expect, "kiosk API over TLS: the answer's code per route and caller")
    assert (allows, refusals) == (0, 0)
    events = {(e["kind"], e["actor"]) for e in trail["events"]}
    assert sum(e["kind"] == "allocation" for e in trail["events"]) == 1  # the allocation refused above: no row
    for kind, actor in (("allocation", "matrix-engineer"), ("rules.apply", "matrix-engineer"),
                        ("rules.file", "rule file"), ("rules.rollback", "matrix-admin"),
                        ("sign_in", "matrix-operator"), ("sign_in.refused", "matrix-operator")):
        assert (kind, actor) in events, (kind, actor, events)
    store = ResultStore(db)
    assert AuditTrail(store.engine).verify().intact
    from inspector.results.rule_texts import rule_text, unresolved, version_of

    with store.engine.connect() as c:  # every result names a rule set whose text is stored, the edits' too
        assert unresolved(c) == []
        assert rule_text(c, version_of(edited)) == edited

    # the model server: every /v1 route x every caller, over TLS, users from the same database
    llm_rows, llm_expect = _model_server_matrix(tiny_llm, tmp_path, db, cert, key, tokens)
    allows, refusals = _matrix(llm_rows, llm_expect, "model server over TLS: the answer's code per route and caller")
    assert (allows, refusals) == (0, 0)


def _model_server_matrix(model: Path, tmp_path: Path, db: str, cert: Path, key: Path,
                         tokens: dict[str, str | None]) -> tuple[dict, dict]:
    port = free_port()
    log = tmp_path / "serve.log"
    svc = tmp_path / "llm-token"
    svc.write_text(tokens["service"] or "")
    svc.chmod(0o600)
    proc = subprocess.Popen([sys.executable, "-m", "inspector.cli", "--models", str(tmp_path / "models"), "llm",
                             "serve", "--model", str(model), "--policy", "lru", "--cache-ratio", "0.5", "--listen",
                             f"127.0.0.1:{port}", "--db", db, "--token-file", str(svc), "--threads", "1",
                             "--tls-cert", str(cert), "--tls-key", str(key)],
                            stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    url = f"https://127.0.0.1:{port}"
    try:
        assert wait_until(lambda: http(url + "/health", timeout=1)[0] == 200, 180), log.read_text()
        name = model.name
        routes = {"/v1/completions": json.dumps({"model": name, "prompt": "def ", "max_tokens": 1}).encode(),
                  "/v1/chat/completions": json.dumps({"model": name, "messages": [{"role": "user", "content": "hi"}],
                                                      "max_tokens": 1}).encode(),
                  "GET /v1/models": None}
        rows, expect = {}, {}
        for route, body in routes.items():
            path = route.removeprefix("GET ")
            rows[route] = {c: http(url + path, body, tokens[c], timeout=60)[0] for c in CALLERS}
            expect[route] = {c: _expected(c, Permission.LLM) for c in CALLERS}
        return rows, expect
    finally:
        os.killpg(proc.pid, 15)
        assert proc.wait(60) == 0, log.read_text()


def test_tls_clients_refuse_a_wrong_certificate_and_plain_http_stays_on_loopback(tmp_path: Path) -> None:
    from prometheus_client.registry import CollectorRegistry

    from inspector.access.tls import server_context
    from inspector.kiosk.http import Endpoints

    cert, key, fp = make_self_signed(tmp_path / "right", ["line-box"])
    other, _, other_fp = make_self_signed(tmp_path / "wrong", ["line-box"])
    assert fp != other_fp and (tmp_path / "right" / "key.pem").stat().st_mode & 0o777 == 0o600

    def endpoints(listen: str, tls: ssl.SSLContext | None) -> Endpoints:
        return Endpoints(listen, CollectorRegistry(), lambda: {"state": "running"},
                         lambda: {"status": "ok", "reasons": []}, tls=tls)

    with pytest.raises(TlsError, match="plain HTTP is served on loopback only"):
        endpoints(f"0.0.0.0:{free_port()}", None)
    served = endpoints(f"127.0.0.1:{free_port()}", server_context(cert, key))
    served.start()
    url = served.url + "/status"
    try:
        assert url.startswith("https://")

        def get(trust: ClientTrust) -> int:
            with urllib.request.urlopen(url, timeout=5, context=trust.context()) as r:
                return r.status

        assert get(ClientTrust(pin=fp)) == 200
        assert get(ClientTrust(ca=str(cert))) == 200  # the self-signed certificate is its own CA
        with pytest.raises(Exception) as refused:
            get(ClientTrust(pin=other_fp))
        assert "not the pinned" in str(refused.value)
        with pytest.raises(Exception) as refused:
            get(ClientTrust(ca=str(other)))
        assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
        with pytest.raises(Exception):  # noqa: B017 - the system's CAs do not know a self-signed box
            get(ClientTrust())
        with pytest.raises(TlsError, match="pinned fingerprint"):
            ClientTrust(pin="12:34").context()
        # the pinned client sent nothing before it refused: the server saw a handshake and no request
        raw = socket.create_connection(served.server.server_address[:2])
        raw.sendall(b"GET /status HTTP/1.1\r\n\r\n")  # plain HTTP to a TLS port: no answer in clear
        raw.settimeout(6)
        assert b"running" not in raw.recv(1000)
        raw.close()
    finally:
        served.stop()
    # client certificates: demanded when a client CA is given
    client_cert, client_key, _ = make_self_signed(tmp_path / "client", ["dashboard"])
    strict = endpoints(f"127.0.0.1:{free_port()}", server_context(cert, key, client_ca=client_cert))
    strict.start()
    try:
        with pytest.raises(Exception):  # noqa: B017 - no client certificate: the handshake fails
            urllib.request.urlopen(strict.url + "/status", timeout=5,
                                   context=ClientTrust(pin=fp).context()).read()
        trust = ClientTrust(pin=fp, cert=str(client_cert), key=str(client_key))
        with urllib.request.urlopen(strict.url + "/status", timeout=5, context=trust.context()) as r:
            assert r.status == 200
    finally:
        strict.stop()


def test_every_stored_result_resolves_to_its_rule_text_across_a_rules_change_and_a_restart(demo,
                                                                                           tmp_path: Path) -> None:
    from inspector.app.line import LineConfig
    from inspector.app.run import line_profiles, open_source
    from inspector.app.service import LineService, ServiceConfig
    from inspector.results.rule_texts import RuleArchive, rule_text, unresolved, version_of
    from inspector.routing.rules import load_rules, parse_rules

    from .test_routing_rules import GOOD

    root, zoo = demo
    path = tmp_path / "mini.yaml"
    path.write_text(GOOD)
    rules = load_rules(path)
    assert rules.text == GOOD and rules.version == version_of(GOOD)
    data = tmp_path / "data"
    data.mkdir()
    store = ResultStore(sqlite_url(data / "results.sqlite"))
    profiles = line_profiles(zoo, root / "models", lambda _m: None)
    service = LineService(rules, zoo, profiles, ServiceConfig(LineConfig(device_mb=40)), store, data,
                          open_source("synthetic", rules, 12, 7, 0.2, 0.1))
    edited = GOOD.replace("threshold: 0.5", "threshold: 0.45")
    import threading

    service.start()
    running = threading.Thread(target=service.run, daemon=True)
    running.start()
    assert wait_until(lambda: service.line.stats.boards >= 2, 120)
    service.line.apply_rules(parse_rules(edited, str(path)))  # a changeover while boards flow
    running.join(300)
    assert not running.is_alive()
    with store.engine.connect() as c:
        assert unresolved(c) == []
        versions = set(c.execute(text("SELECT DISTINCT ruleset_version FROM inspections")).scalars())
        assert versions == {version_of(GOOD), version_of(edited)}
        assert {v: rule_text(c, v) for v in versions} == {version_of(GOOD): GOOD, version_of(edited): edited}
    # the line's own copies outlive the process: a restart finds a spooled board's text on disk
    again = RuleArchive(data / "rulesets")
    assert again.text(version_of(edited)) == (rules.recipe, edited)
    (data / "rulesets" / f"{version_of(edited)}.yaml").write_text("# recipe: x\nsomething else\n")
    assert RuleArchive(data / "rulesets").text(version_of(edited)) is None  # a damaged copy is no text at all


def test_a_review_from_the_cli_is_stored_and_recorded_under_who_made_it(tmp_path: Path, capsys,
                                                                        monkeypatch) -> None:
    from .test_plant_db import line_board

    store, users, trail = _book(tmp_path)
    board = line_board("line-1", "aoi-1", "CLI-1", 0, fail=True)
    store.write([board])
    users.add(ADMIN, "rosa", "operator", PASSWORD)
    db = ["--db", sqlite_url(tmp_path / "r.sqlite")]
    review = ["review", "--inspection", board.inspection_id, "--ref", "C1", "--call", "confirmed", *db]
    monkeypatch.setenv("INSPECTOR_PASSWORD", PASSWORD)
    assert main([*review, "--as", "rosa", "--reason", "seen under the scope"]) == 0
    assert json.loads(capsys.readouterr().out)["reviewer"] == "rosa"  # the signed-in name, not free text
    monkeypatch.setenv("INSPECTOR_PASSWORD", "not it")
    assert main([*review, "--as", "rosa"]) == 3  # a wrong password changes nothing
    # no --as: recorded under the system account that ran it; two defects, the second of its own class
    assert main([*review, "--box", "2,3,14,9.5", "--box", "20,1,30,8:polarity"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["boxes"] == [{"box": [2, 3, 14, 9.5]}, {"box": [20, 1, 30, 8], "class": "polarity"}]  # on the crop
    events = trail.events("review")
    assert [e.actor.split(":")[0] for e in events] == ["system", "rosa"]
    assert events[1].reason == "seen under the scope" and json.loads(events[0].before)["reviewer"] == "rosa"
    assert json.loads(events[0].after)["boxes"] == said["boxes"]
    with pytest.raises(SystemExit):  # not four numbers: argparse says so
        main([*review, "--box", "2,3,14"])
    assert "is not X0,Y0,X1,Y1" in capsys.readouterr().err


def test_an_address_that_keeps_failing_to_sign_in_is_told_to_wait(tmp_path: Path) -> None:
    """Many names from one address: each name's own lockout never trips, the address's does (429)."""
    from inspector.kiosk import sign_in as sign_in_module
    from inspector.kiosk.http import Call, HttpError
    from inspector.kiosk.sign_in import SignIn

    _, users, _ = _book(tmp_path)
    users.add(ADMIN, "vera", "operator", PASSWORD)
    door = SignIn(users, 1.0)
    nobody = Identity("-", "-", "10.1.1.1 via the kiosk API")

    def attempt(name: str, password: str, address: str = "10.1.1.1") -> dict:
        return door(Call(json.dumps({"user": name, "password": password}).encode(), nobody, None, address))

    for i in range(sign_in_module.ADDRESS_REFUSALS):
        with pytest.raises(Unauthenticated):
            attempt(f"guess-{i}", "guess-guess")
    with pytest.raises(HttpError) as told:
        attempt("vera", PASSWORD)  # even the right password, from that address, waits
    assert told.value.code == 429 and "10.1.1.1" in str(told.value)
    assert attempt("vera", PASSWORD, "10.1.1.2")["role"] == "operator"  # another address is not held up
