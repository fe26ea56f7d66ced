"""The headless kiosk (the line box's room): a LineService run as a long-lived systemd service.

- systemd.py  sd_notify over $NOTIFY_SOCKET: READY, STATUS, WATCHDOG, STOPPING (no libsystemd needed)
- health.py   ok / degraded / stalled / stopping from a snapshot, with the reasons an operator can act on
- metrics.py  a Prometheus collector that reads the snapshot at scrape time (nothing counted twice)
- http.py     /metrics, /health, /status on localhost
- service.py  the Kiosk: line + rules watcher + endpoints + watchdog + SIGTERM drain
"""
