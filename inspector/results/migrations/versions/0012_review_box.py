"""reviews.box_*: the box a reviewer drew on the part's kept crop (crop pixels), where the defect is

Additive (expand only): the releases at 0007 to 0011 run on this schema unchanged, and this release runs on them
too (it writes the box only where the schema has it and says so where it cannot), so boxes and `inspector db
upgrade` may go in either order.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""
import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None
runs_with = "0007"  # the oldest release schema whose code runs on this one (results/revisions.py)

COLUMNS = ("box_x0", "box_y0", "box_x1", "box_y1")


def upgrade() -> None:
    with op.batch_alter_table("reviews") as batch:
        for name in COLUMNS:
            batch.add_column(sa.Column(name, sa.Float, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("reviews") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
