"""inspection ids (unique), 64-bit keys, the missing indexes, a naming convention, dead letters

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

Boards stored before this revision get an inspection id of their own (UUID4), so the column can be
NOT NULL and unique from here on.
"""
import uuid

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    with op.batch_alter_table("inspections") as batch:
        batch.add_column(sa.Column("uuid", sa.String(36), nullable=True))
    rows = conn.execute(sa.text("SELECT id FROM inspections WHERE uuid IS NULL")).scalars().all()
    for rid in rows:
        conn.execute(sa.text("UPDATE inspections SET uuid = :u WHERE id = :i"), {"u": str(uuid.uuid4()), "i": rid})
    with op.batch_alter_table("inspections") as batch:
        batch.alter_column("uuid", existing_type=sa.String(36), nullable=False)
        batch.create_unique_constraint("uq_inspections_uuid", ["uuid"])
    with op.batch_alter_table("component_results") as batch:
        batch.drop_index("ix_component_results_inspection")
        batch.create_index("ix_component_results_inspection_id", ["inspection_id"])
        batch.create_index("ix_component_results_component_type_verdict", ["component_type", "verdict"])
    if conn.dialect.name == "postgresql":  # SQLite's INTEGER keys are 64-bit already
        op.alter_column("component_results", "inspection_id", type_=sa.BigInteger, existing_nullable=False)
        op.alter_column("component_results", "id", type_=sa.BigInteger, existing_nullable=False)
        op.alter_column("inspections", "id", type_=sa.BigInteger, existing_nullable=False)
    key = sa.BigInteger().with_variant(sa.Integer, "sqlite")
    op.create_table(
        "dead_letters",
        sa.Column("id", key, primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("uuid", sa.String(64), nullable=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_dead_letters"),
    )
    op.create_index("ix_dead_letters_at", "dead_letters", ["at"])


def downgrade() -> None:
    op.drop_table("dead_letters")
    with op.batch_alter_table("component_results") as batch:
        batch.drop_index("ix_component_results_component_type_verdict")
        batch.drop_index("ix_component_results_inspection_id")
        batch.create_index("ix_component_results_inspection", ["inspection_id"])
    with op.batch_alter_table("inspections") as batch:
        batch.drop_constraint("uq_inspections_uuid", type_="unique")
        batch.drop_column("uuid")
