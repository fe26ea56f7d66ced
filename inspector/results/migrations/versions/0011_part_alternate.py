"""component_results.alternate: the approved make a part was compared with (its window's file, routing/alternates.py)

Additive (expand only): the releases at 0007 to 0010 run on this schema unchanged, and this release runs on them
too (it writes the column only where the schema has it), so boxes and `inspector db upgrade` may go in either order.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""
import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None
runs_with = "0007"  # the oldest release schema whose code runs on this one (results/revisions.py)


def upgrade() -> None:
    with op.batch_alter_table("component_results") as batch:
        batch.add_column(sa.Column("alternate", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("component_results") as batch:
        batch.drop_column("alternate")
