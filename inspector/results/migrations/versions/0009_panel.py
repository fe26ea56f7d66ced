"""panel_boards, panel_failed, panel_skipped: a panel's boards, those that did not pass and its x-outs (units.py)

Additive (expand only): the releases at 0007 and 0008 run on this schema unchanged, and this release runs on them
too (it writes the columns only where the schema has them), so boxes and `inspector db upgrade` may go in either
order.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29
"""
import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None
runs_with = "0007"  # the oldest release schema whose code runs on this one (results/revisions.py)


def upgrade() -> None:
    with op.batch_alter_table("inspections") as batch:
        batch.add_column(sa.Column("panel_boards", sa.Integer, nullable=True))
        batch.add_column(sa.Column("panel_failed", sa.Text, nullable=True))
        batch.add_column(sa.Column("panel_skipped", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("inspections") as batch:
        batch.drop_column("panel_skipped")
        batch.drop_column("panel_failed")
        batch.drop_column("panel_boards")
