"""Results: every board and component verdict, stored, exported and published.

- records.py     what crosses into this room: BoardRecord / PartRecord dataclasses (no ORM objects)
- units.py       a board's units: a panel's boards each with its verdict, one rule for every reader of a result
- schema.py      SQLAlchemy 2 tables; migrations/ holds their Alembic history
- store.py       open any SQLAlchemy URL (SQLite in WAL mode by default), check its schema, write, query
- errors.py      how the database fails a write (unavailable, rejected) and why a release may not run on it
- revisions.py   which schema revisions this release runs on; `db upgrade` (the only change to a shared schema)
- scope.py       which line and station a read, export, prune or rate is about
- filters.py     what a query or export selects (time, serial, verdict, type, scope)
- activity.py    what each line of a shared database did lately (plant status)
- reader.py      what a dashboard reads of a line's results (the database, or a kiosk's API)
- releases.py    expert versions released to the plant's lines, checked against their sha256
- rollouts.py    the record of every rollout step
- bench_db.py    `inspector db bench`: millions of generated parts, one line's reads timed
- writer.py      one batched writer thread behind a bounded queue; idempotent, spools while the DB is down,
                 sets refused rows aside as dead letters
- spool.py       the on-disk spool: fsynced appends, a saved read position, torn lines to the dead letters
- credentials.py the database URL and MQTT password from the environment or systemd credentials, never argv
- retention.py   `inspector db prune`: boards, kept crops and archived images older than the retention
- crops.py       PNG crops of flagged parts, one folder per inspection, none below a free-disk floor
- export.py      CSV, one row per component result, with filters
- unit_export.py CSV, one row per unit: each board, a panel's boards each with its verdict (`export --units`)
- mqtt.py        per-board JSON to an MQTT broker (paho-mqtt)
"""
