"""The headless kiosk (the line box's room): a LineService run as a long-lived systemd service.

- systemd.py  sd_notify over $NOTIFY_SOCKET: READY, STATUS, WATCHDOG, STOPPING (no libsystemd needed)
- health.py   ok / degraded / critical / stalled / stopping from a snapshot, with reasons an operator can act on
- metrics.py  a Prometheus collector that reads the snapshot at scrape time (nothing counted twice)
- http.py     /metrics, /health, /status, /rules on localhost; token-guarded POSTs; a bounded pool
- control.py  the verbs behind the token: rules (validate, write atomically, apply), rollback, allocation
- lending.py  the memory set aside for a language model (--llm-mb), lent on a lease (/ledger/grant, renew, release)
- service.py  the Kiosk: line + rules watcher + endpoints + watchdog + SIGTERM drain
"""
