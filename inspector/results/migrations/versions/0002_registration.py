"""board registration (transform, residual, fiducials found) and board-level errors

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("inspections") as batch:  # batch: SQLite alters tables by copying them
        batch.add_column(sa.Column("error", sa.Text, nullable=True))
        batch.add_column(sa.Column("reg_transform", sa.String(256), nullable=True))
        batch.add_column(sa.Column("reg_residual_px", sa.Float, nullable=True))
        batch.add_column(sa.Column("reg_fiducials", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("inspections") as batch:
        for name in ("reg_fiducials", "reg_residual_px", "reg_transform", "error"):
            batch.drop_column(name)
