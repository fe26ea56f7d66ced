"""The headless kiosk (the line box's room): a LineService run as a long-lived systemd service.

- systemd.py  sd_notify over $NOTIFY_SOCKET: READY, STATUS, WATCHDOG, STOPPING (no libsystemd needed)
- health.py   ok / degraded / critical / stalled / stopping from a snapshot, with reasons an operator can act on
- metrics.py  a Prometheus collector that reads the snapshot at scrape time (nothing counted twice)
- http.py     /metrics, /health, /status, /rules; every POST names its permission and the gate checks the caller's
              token and role (access/); HTTPS off loopback; a bounded pool
- control.py  the verbs behind a role: rules (validate, write atomically, apply), rollback, allocation, reviews,
              expert versions; each one recorded in the audit trail under the person who made it
- sign_in.py  /auth/sign-in and /auth/sign-out: a name and password for a session token, and its revocation
- audit_api.py  /audit/events and /audit/verify for the attached dashboard
- results_api.py  the line's stored results under /results/ (a dashboard on another machine reads them)
- lending.py  the memory set aside for a language model (--llm-mb), lent on a lease (/ledger/grant, renew, release)
- service.py  the Kiosk: line + rules watcher + endpoints + watchdog + SIGTERM drain
"""
