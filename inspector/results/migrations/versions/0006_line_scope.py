"""line scope: indexes for one line's reads on a plant's shared database, and the schema's own record

Additive (expand only): a release at 0005 runs on this schema unchanged, so boxes are upgraded one at a time
after `inspector db upgrade` (`runs_with`). On PostgreSQL the index builds hold off writes for as long as they
take (seconds per million boards); the kiosks spool meanwhile and lose nothing.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None
runs_with = "0005"  # the oldest release schema whose code runs on this one (results/revisions.py)


def upgrade() -> None:
    op.create_index("ix_inspections_line_station_id", "inspections", ["line", "station", "id"])
    op.create_index("ix_inspections_line_station_started_at", "inspections", ["line", "station", "started_at"])
    op.create_table(
        "schema_record",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("revision", sa.String(32), nullable=False),
        sa.Column("runs_with", sa.String(32), nullable=False),
        sa.Column("release", sa.String(64), nullable=False),
        sa.Column("upgraded_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("schema_record")
    op.drop_index("ix_inspections_line_station_started_at", "inspections")
    op.drop_index("ix_inspections_line_station_id", "inspections")
