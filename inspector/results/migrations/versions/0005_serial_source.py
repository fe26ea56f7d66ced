"""serial_source: where a board's serial came from (its code, NOREAD, a sidecar, a file name, ...)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("inspections") as batch:
        batch.add_column(sa.Column("serial_source", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("inspections") as batch:
        batch.drop_column("serial_source")
