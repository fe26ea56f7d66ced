"""user, audit and tls: who may change the line, the record of who did, and the certificates of its APIs.

User and token changes need an admin: `--as NAME` and that admin's password ($INSPECTOR_PASSWORD, or asked at the
terminal). Only the very first admin of an empty database is added without one (recorded under the system
account that ran the command).
"""
from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path

from .common import database_flags, db_url, station_flags
from .exits import UsageError


def _open(args: argparse.Namespace):  # noqa: ANN202 - (ResultStore, UserBook, AuditTrail)
    from ..access.audit import AuditTrail
    from ..access.users import UserBook
    from ..results.store import ResultStore

    store = ResultStore(db_url(args))
    store.ready()
    trail = AuditTrail(store.engine, getattr(args, "line", "") or "", getattr(args, "station", "") or "")
    return store, UserBook(store.engine, trail), trail


def acting(args: argparse.Namespace, users=None):  # noqa: ANN001, ANN201 - (UserBook | None) -> an Identity
    """Who runs a command that changes something: the person of `--as` (signed in here, password from
    $INSPECTOR_PASSWORD or asked), else the system account running it (a shell on the box is that account)."""
    from ..access.identity import Identity
    from ..app.changes import HOST

    origin = f"cli: {getpass.getuser()} on {HOST}"
    if getattr(args, "as_user", None) is None:
        return Identity(f"system:{getpass.getuser()}", "system", origin)
    if users is None:
        store, users, _ = _open(args)
    password = os.environ.get("INSPECTOR_PASSWORD") or getpass.getpass(f"password of {args.as_user}: ")
    return users.sign_in(args.as_user, password, origin)


def record_here(args: argparse.Namespace, who, change) -> None:  # noqa: ANN001 - an Identity, a Change
    """Put a change made by this command into the audit trail of its results database; said, never hidden,
    when it cannot be."""
    from ..access.audit import AuditTrail
    from ..results.store import ResultStore

    try:
        store = ResultStore(db_url(args))
        store.ready()
        AuditTrail(store.engine, getattr(args, "line", "") or "", getattr(args, "station", "") or "").record(
            who, change)
        store.close()
    except Exception as exc:  # noqa: BLE001 - the change is made; its record must not vanish silently
        print(f"inspector: warning: the change was made but NOT recorded in the audit trail: {exc}",
              file=sys.stderr)


def as_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--as", dest="as_user", metavar="NAME",
                   help="make the change as this user (password from $INSPECTOR_PASSWORD, or asked); default: "
                        "recorded under the system account running the command")


def _admin(args: argparse.Namespace, users, bootstrap: bool = False):  # noqa: ANN001, ANN202 - an Identity
    """The admin making this change (signed in here), or, for the first admin of an empty database, the system
    account running the command."""
    from ..access.identity import Forbidden, Identity
    from ..access.roles import Permission

    if args.as_user is None:
        if bootstrap and not users.any_admin():
            system = acting(args)
            return Identity(system.name, "admin", system.origin)
        raise Forbidden("changing users and tokens needs an admin: add --as NAME (their password from "
                        "$INSPECTOR_PASSWORD or asked here)")
    who = acting(args, users)
    who.require(Permission.USERS)
    return who


def _new_password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass(f"new password for {args.name}: ")
    if first != getpass.getpass("again: "):
        raise ValueError("the two passwords differ; nothing changed")
    return first


def cmd_user(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    store, users, _ = _open(args)
    try:
        verb = args.user_command
        if verb == "list":
            rows = users.users()
            print(f"{'user':<20} {'role':<9} {'state':<9} {'tokens':>6}  created")
            for u in rows:
                print(f"{u.name:<20} {u.role:<9} {'disabled' if u.disabled else 'active':<9} {u.tokens:>6}  "
                      f"{u.created_at:%Y-%m-%d %H:%M}")
            if not rows:
                print("no users yet: `inspector user add NAME --role admin` makes the first admin")
            return 0
        if verb == "tokens":
            now = datetime.now(timezone.utc)
            for t in users.tokens(args.name):
                expires = f"{t.expires_at:%Y-%m-%d %H:%M}" if t.expires_at else "never"
                print(f"{t.key}  {t.user:<16} {t.state(now):<8} expires {expires:<16}  {t.label}")
            return 0
        who = _admin(args, users, bootstrap=verb == "add" and args.role == "admin")
        if verb == "add":
            users.add(who, args.name, args.role, _new_password(args))
            print(f"user {args.name} ({args.role}) added by {who.name}")
        elif verb == "disable":
            users.disable(who, args.name, args.reason)
            print(f"user {args.name} disabled; their tokens stop at once")
        elif verb == "role":
            users.set_role(who, args.name, args.role, args.reason)
            print(f"user {args.name} is now {args.role}")
        elif verb == "password":
            users.set_password(who, args.name, _new_password(args))
            print(f"password of {args.name} changed")
        elif verb == "token":
            token = users.issue(who, args.name, args.label, None if args.days <= 0 else args.days)
            if args.out:
                fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(token + "\n")
                print(f"token for {args.name} written to {args.out} (mode 600); it is shown nowhere else")
            else:
                print(token)
        elif verb == "revoke":
            users.revoke(who, args.key, args.reason)
            print(f"token {args.key} revoked")
        return 0
    finally:
        store.close()


def cmd_audit(args: argparse.Namespace) -> int:
    import json

    from ..results.rule_texts import unresolved

    store, _, trail = _open(args)
    try:
        if args.audit_command == "list":
            for e in reversed(trail.events(args.kind, args.actor, args.limit)):
                change = f"{e.before or '-'} -> {e.after or '-'}"
                print(f"{e.id:>6} {e.at:%Y-%m-%d %H:%M:%S} {e.actor:<16} {e.role:<9} {e.kind:<16} {e.subject}  "
                      f"{change}{'  (' + e.reason + ')' if e.reason else ''}  [{e.origin}]")
            return 0
        if args.audit_command == "export":
            out = open(args.out, "w", newline="", encoding="utf-8") if args.out else sys.stdout
            try:
                n = trail.export_csv(out)
            finally:
                if args.out:
                    out.close()
            if args.out:
                print(f"{n} audit rows written to {args.out}")
            return 0
        if args.audit_command == "rule-text":
            from ..results.rule_texts import rule_text

            with store.engine.connect() as c:
                text = rule_text(c, args.version)
            if text is None:
                print(f"no rule set {args.version} is stored", file=sys.stderr)
                return 1
            sys.stdout.write(text)
            return 0
        verdict = trail.verify()  # verify
        with store.engine.connect() as c:
            missing = unresolved(c)
        doc = {"rows": verdict.rows, "head": verdict.head, "intact": verdict.intact,
               "broken": [{"id": b.row_id, "why": b.why} for b in verdict.broken],
               "results_without_rule_text": [{"version": v, "boards": n} for v, n in missing]}
        if args.json:
            print(json.dumps(doc, indent=2))
        else:
            print(f"audit trail: {verdict.rows} rows, head {verdict.head}")
            for b in verdict.broken:
                print(f"  BROKEN at row {b.row_id}: {b.why}")
            print("  intact" if verdict.intact else f"  {len(verdict.broken)} break(s): the trail was tampered with")
            print("stored results whose rule set has no stored text: "
                  + (", ".join(f"{v} ({n} boards)" for v, n in missing) if missing else "none"))
        return 0 if verdict.intact and not missing else 1
    finally:
        store.close()


def cmd_tls(args: argparse.Namespace) -> int:
    from ..access.tls import fingerprint, make_self_signed

    if args.tls_command == "bench":
        import json

        from ..access.tls_bench import compare, table
        from ..endpoint import read_token

        body = json.loads(args.body) if args.body else None
        token = read_token(args.token_file)
        rows = [(how, *compare(args.plain_url.rstrip("/"), args.tls_url.rstrip("/"), args.path, args.requests, token,
                               body, keep)) for how, keep in (("new per request", False), ("kept alive", True))]
        print(table(args.path, rows))
        return 0
    if args.tls_command == "fingerprint":
        print(fingerprint(args.cert))
        return 0
    out = Path(args.out)
    if (out / "cert.pem").exists() and not args.force:
        print(f"{out / 'cert.pem'} exists: kept (its fingerprint {fingerprint(out / 'cert.pem')}); --force makes a "
              "new pair")
        return 0
    hosts = [h for h in (args.host or []) if h] or [__import__("socket").gethostname()]
    cert, key, fp = make_self_signed(out, hosts, args.days)
    print(f"certificate {cert}\nkey         {key} (mode 600)\nfingerprint {fp}\n"
          f"clients pin it: --tls-pin {fp}")
    return 0


def cmd_opcua_trust(args: argparse.Namespace) -> int:
    """The OPC UA server's trust list (plc/trust.py), in the data directory's opcua/ folder."""
    from ..plc.trust import TrustList
    from .common import data_of

    trust = TrustList(data_of(args) / "opcua")
    if args.tls_command in ("trusted", "rejected"):
        listed = trust.listing(rejected=args.tls_command == "rejected")
        for c in listed:
            print(f"{c.fingerprint[:16]}  {c.subject}  valid until {c.not_after[:10]}")
        if not listed:
            print(f"none in {trust.rejected if args.tls_command == 'rejected' else trust.trusted}")
        return 0
    if args.tls_command == "untrust" and len(args.fingerprint.replace(":", "")) < 8:
        raise UsageError("give at least 8 characters of the fingerprint")
    try:
        c = trust.trust(args.cert) if args.tls_command == "trust" else trust.untrust(args.fingerprint)
    except (ValueError, OSError) as exc:
        raise UsageError(str(exc)) from None
    word = "trusted" if args.tls_command == "trust" else "no longer trusted"
    print(f"{word}: {c.subject} (fingerprint {c.fingerprint[:16]}, valid until {c.not_after[:10]}); the OPC UA "
          "server reads the list at each new session")
    return 0


def _admin_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--as", dest="as_user", metavar="ADMIN", help="the admin making the change (password from "
                                                                  "$INSPECTOR_PASSWORD, or asked)")
    database_flags(p)
    station_flags(p)


ROLE_HELP = ("operator: watches and reviews; engineer: also changes the line (rules, memory, experts, camera); "
             "admin: also users and tokens")


def add_user(p: argparse.ArgumentParser) -> None:
    from ..access.roles import PERSON_ROLES

    sub = p.add_subparsers(dest="user_command", required=True)
    add = sub.add_parser("add", help="a new user with a role and a password (asked, or --password-stdin)")
    add.add_argument("name", help="the sign-in name (letters, digits, . _ @ -; up to 64)")
    add.add_argument("--role", required=True, choices=PERSON_ROLES, help=ROLE_HELP)
    add.add_argument("--password-stdin", action="store_true", help="read the new password from standard input")
    ls = sub.add_parser("list", help="users, roles, live tokens")
    dis = sub.add_parser("disable", help="a user signs in no more; their tokens stop at once")
    dis.add_argument("name", help="the user's sign-in name")
    role = sub.add_parser("role", help="change a user's role")
    role.add_argument("name", help="the user's sign-in name")
    role.add_argument("--role", required=True, choices=PERSON_ROLES, help=ROLE_HELP)
    pw = sub.add_parser("password", help="set a user's password")
    pw.add_argument("name", help="the user's sign-in name")
    pw.add_argument("--password-stdin", action="store_true", help="read the new password from standard input")
    tok = sub.add_parser("token", help="a new API token for a user (printed once, or --out FILE)")
    tok.add_argument("name", help="the user the token signs in as")
    tok.add_argument("--label", default="api", help="what it is for (shown in `user tokens`)")
    tok.add_argument("--days", type=float, default=90.0, help="it expires after this many days (0: never; "
                                                              "default 90)")
    tok.add_argument("--out", help="write it to this file (mode 600) instead of printing it")
    toks = sub.add_parser("tokens", help="a user's tokens (or everyone's) by key, and their state")
    toks.add_argument("name", nargs="?", help="one user's tokens (default: everyone's)")
    rev = sub.add_parser("revoke", help="revoke a token by its key (`user tokens` lists them)")
    rev.add_argument("key", help="the token's key: the 12 hex digits after insp_ (`user tokens` lists them)")
    for q in (dis, role, rev):
        q.add_argument("--reason", help="why (goes into the audit trail)")
    for q in (add, ls, dis, role, pw, tok, toks, rev):
        _admin_flags(q)
        q.set_defaults(func=cmd_user)


def add_audit(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="audit_command", required=True)
    ls = sub.add_parser("list", help="the newest changes, oldest first")
    ls.add_argument("--kind", help="one kind (rules.apply, review, ...), or a prefix with * (rules.*)")
    ls.add_argument("--actor", help="one user")
    ls.add_argument("--limit", type=int, default=50, help="the newest this many changes (default 50)")
    ver = sub.add_parser("verify", help="check the hash chain and that every stored result's rule set has its text "
                                        "(exit 1 when not)")
    ver.add_argument("--json", action="store_true", help="print the rows, the head, the breaks and the results "
                                                     "without rule text as JSON")
    ex = sub.add_parser("export", help="the whole trail as CSV, with every row's hashes")
    ex.add_argument("--out", help="file (default: standard output)")
    rt = sub.add_parser("rule-text", help="the text of a rule-set version (a result's ruleset_version)")
    rt.add_argument("version", help="the rule set's version (a result's ruleset_version)")
    for q in (ls, ver, ex, rt):
        database_flags(q)
        station_flags(q)
        q.set_defaults(func=cmd_audit)


def add_tls(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="tls_command", required=True)
    mk = sub.add_parser("make", help="a self-signed certificate and key for this box's APIs (the installer runs it)")
    mk.add_argument("--out", required=True, help="directory for cert.pem and key.pem")
    mk.add_argument("--host", action="append", help="a name or address clients reach it by (repeat; default: the "
                                                    "host name; localhost and 127.0.0.1 always)")
    mk.add_argument("--days", type=int, default=825, help="the certificate is valid for this many days (default 825)")
    mk.add_argument("--force", action="store_true", help="replace an existing pair")
    mk.set_defaults(func=cmd_tls)
    bench = sub.add_parser("bench", help="one route's latency over plain HTTP and over TLS, side by side (two "
                                         "listeners of the same kind; --tls-pin/--tls-ca for the TLS one)")
    bench.add_argument("--plain-url", required=True, help="the plain listener's base URL (http://127.0.0.1:PORT)")
    bench.add_argument("--tls-url", required=True, help="the TLS listener's base URL (https://127.0.0.1:PORT)")
    bench.add_argument("--path", default="/status", help="the route (default /status)")
    bench.add_argument("--body", help="JSON to POST (default: a GET)")
    bench.add_argument("--token-file", help="a token file for a guarded route")
    bench.add_argument("--requests", type=int, default=300, help="timed requests per listener (default 300)")
    bench.set_defaults(func=cmd_tls)
    fp = sub.add_parser("fingerprint", help="a certificate's sha256 fingerprint, as clients pin it")
    fp.add_argument("cert", help="the certificate file (PEM)")
    fp.set_defaults(func=cmd_tls)
    trust = sub.add_parser("trust", help="let an OPC UA client (the PLC, the MES) in: its certificate file, or the "
                                         "fingerprint of one the server refused (`tls rejected`)")
    trust.add_argument("cert", help="a DER or PEM certificate file, or a refused certificate's fingerprint (a prefix)")
    untrust = sub.add_parser("untrust", help="take an OPC UA client's certificate out of the trust list")
    untrust.add_argument("fingerprint", help="its fingerprint (a prefix of at least 8 characters)")
    trusted = sub.add_parser("trusted", help="the OPC UA clients let in")
    rejected = sub.add_parser("rejected", help="the OPC UA clients the server refused, kept to be trusted on purpose")
    for q in (trust, untrust, trusted, rejected):
        q.add_argument("--data", help="the data directory whose opcua/ folder holds the server's certificate "
                                      "(default: as `inspector run` finds it)")
        q.set_defaults(func=cmd_opcua_trust)
