"""reviews.boxes: all the boxes a reviewer drew on the part's kept crop, each with its class where it names one (JSON)

Additive (expand only): a review's first box stays in reviews.box_* (0012), so the releases at 0007 to 0012 run on
this schema unchanged and read that one box; this release runs on them too (it writes several boxes, or a box's own
class, only where the schema has this column and says so where it cannot), so the boxes and `inspector db upgrade`
may go in either order.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""
import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None
runs_with = "0007"  # the oldest release schema whose code runs on this one (results/revisions.py)


def upgrade() -> None:
    with op.batch_alter_table("reviews") as batch:
        batch.add_column(sa.Column("boxes", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("reviews") as batch:
        batch.drop_column("boxes")
