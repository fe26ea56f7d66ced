"""panel_serials: a panel's boards' own serials (JSON, position -> serial), read from each board's code

Additive (expand only): the releases at 0007 to 0009 run on this schema unchanged, and this release runs on them
too (it writes the column only where the schema has it), so boxes and `inspector db upgrade` may go in either order.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None
runs_with = "0007"  # the oldest release schema whose code runs on this one (results/revisions.py)


def upgrade() -> None:
    with op.batch_alter_table("inspections") as batch:
        batch.add_column(sa.Column("panel_serials", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("inspections") as batch:
        batch.drop_column("panel_serials")
