"""board_id: the IPC-HERMES-9852 BoardId, the GUID a board carries down an SMT line (hermes/, app/hermes_link.py)

Additive (expand only): the previous release (at 0007) runs on this schema unchanged, and this release runs on
0007 too (it writes the column only where the schema has it), so boxes and `inspector db upgrade` may go in either
order.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None
runs_with = "0007"  # the oldest release schema whose code runs on this one (results/revisions.py)


def upgrade() -> None:
    with op.batch_alter_table("inspections") as batch:
        batch.add_column(sa.Column("board_id", sa.String(36), nullable=True))
        batch.create_index("ix_inspections_board_id", ["board_id"])


def downgrade() -> None:
    with op.batch_alter_table("inspections") as batch:
        batch.drop_index("ix_inspections_board_id")
        batch.drop_column("board_id")
