"""reviews: an operator's word on a part's call (confirmed defect, false call, escape)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    key = sa.BigInteger().with_variant(sa.Integer, "sqlite")
    op.create_table(
        "reviews",
        sa.Column("id", key, primary_key=True),
        sa.Column("component_result_id", key, nullable=False),
        sa.Column("inspection_uuid", sa.String(36), nullable=False),
        sa.Column("ref", sa.String(32), nullable=False),
        sa.Column("component_type", sa.String(128), nullable=False),
        sa.Column("expert", sa.String(128), nullable=False),
        sa.Column("weights_sha256", sa.String(64), nullable=True),
        sa.Column("call", sa.String(16), nullable=False),
        sa.Column("correct_class", sa.String(32), nullable=True),
        sa.Column("reviewer", sa.String(64), nullable=False),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_reviews"),
        sa.ForeignKeyConstraint(["component_result_id"], ["component_results.id"], ondelete="CASCADE",
                                name="fk_reviews_component_result_id_component_results"),
        sa.UniqueConstraint("component_result_id", name="uq_reviews_component_result_id"),
    )
    op.create_index("ix_reviews_inspection_uuid", "reviews", ["inspection_uuid"])
    op.create_index("ix_reviews_component_type", "reviews", ["component_type"])
    op.create_index("ix_reviews_at", "reviews", ["at"])


def downgrade() -> None:
    op.drop_table("reviews")
