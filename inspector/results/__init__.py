"""Results: every board and component verdict, stored, exported and published.

- records.py     what crosses into this room: BoardRecord / PartRecord dataclasses (no ORM objects)
- schema.py      SQLAlchemy 2 tables; migrations/ holds their Alembic history
- store.py       open any SQLAlchemy URL (SQLite in WAL mode by default), migrate to head, write, query
- writer.py      one batched writer thread behind a bounded queue; idempotent, spools while the DB is down,
                 sets refused rows aside as dead letters
- spool.py       the on-disk spool: fsynced appends, a saved read position, torn lines to the dead letters
- credentials.py the database URL and MQTT password from the environment or systemd credentials, never argv
- retention.py   `inspector db prune`: boards, kept crops and archived images older than the retention
- crops.py       PNG crops of flagged parts, one folder per inspection, none below a free-disk floor
- export.py      CSV, one row per component result, with filters
- mqtt.py        per-board JSON to an MQTT broker (paho-mqtt)
"""
