"""Alembic environment: run with the connection the store hands over (no alembic.ini needed)."""
from alembic import context

from inspector.results.schema import Base

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through inspector.results.store.migrate(), which passes a connection")
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
