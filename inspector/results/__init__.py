"""Results: every board and component verdict, stored, exported and published.

- records.py     what crosses into this room: BoardRecord / PartRecord dataclasses (no ORM objects)
- schema.py      SQLAlchemy 2 tables; migrations/ holds their Alembic history
- store.py       open any SQLAlchemy URL (SQLite in WAL mode by default), migrate to head, write, query
- writer.py      one batched writer thread that never blocks inference; spools to disk while the DB is down
- export.py      CSV, one row per component result, with filters
- mqtt.py        per-board JSON to an MQTT broker (paho-mqtt)
"""
