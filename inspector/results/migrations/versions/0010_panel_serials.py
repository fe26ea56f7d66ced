"""panel_serials, unit_serials: a panel's boards' own serials (JSON on its row; a row each, indexed, to search by)

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
    key = sa.BigInteger().with_variant(sa.Integer, "sqlite")
    op.create_table(
        "unit_serials",
        sa.Column("id", key, primary_key=True),
        sa.Column("inspection_id", key, sa.ForeignKey("inspections.id", ondelete="CASCADE",
                                                       name="fk_unit_serials_inspection_id_inspections"),
                  nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("serial", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_unit_serials"),
    )
    op.create_index("ix_unit_serials_inspection_id", "unit_serials", ["inspection_id"])
    op.create_index("ix_unit_serials_serial", "unit_serials", ["serial"])


def downgrade() -> None:
    op.drop_index("ix_unit_serials_serial", table_name="unit_serials")
    op.drop_index("ix_unit_serials_inspection_id", table_name="unit_serials")
    op.drop_table("unit_serials")
    with op.batch_alter_table("inspections") as batch:
        batch.drop_column("panel_serials")
