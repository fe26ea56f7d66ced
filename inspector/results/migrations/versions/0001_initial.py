"""inspections and component results

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "inspections",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("line", sa.String(64), nullable=False),
        sa.Column("station", sa.String(64), nullable=False),
        sa.Column("board_serial", sa.String(128), nullable=False),
        sa.Column("recipe", sa.String(128), nullable=False),
        sa.Column("ruleset_version", sa.String(64), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("source", sa.String(512), nullable=False),
    )
    op.create_index("ix_inspections_started_at", "inspections", ["started_at"])
    op.create_index("ix_inspections_board_serial", "inspections", ["board_serial"])
    op.create_index("ix_inspections_verdict", "inspections", ["verdict"])
    op.create_table(
        "component_results",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("inspection_id", sa.Integer, sa.ForeignKey("inspections.id", ondelete="CASCADE"), nullable=False),
        sa.Column("ref", sa.String(32), nullable=False),
        sa.Column("component_type", sa.String(128), nullable=False),
        sa.Column("expert", sa.String(128), nullable=False),
        sa.Column("weights_sha256", sa.String(64)),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("defect_class", sa.String(32), nullable=False),
        sa.Column("score", sa.Float),
        sa.Column("box_x0", sa.Float),
        sa.Column("box_y0", sa.Float),
        sa.Column("box_x1", sa.Float),
        sa.Column("box_y1", sa.Float),
        sa.Column("crop_path", sa.String(512)),
        sa.Column("error", sa.Text),
    )
    op.create_index("ix_component_results_inspection", "component_results", ["inspection_id"])


def downgrade() -> None:
    op.drop_table("component_results")
    op.drop_table("inspections")
