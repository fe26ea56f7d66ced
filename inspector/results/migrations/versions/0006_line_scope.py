"""a plant's database: indexes for one line's reads, the schema's own record, expert releases and rollouts

Additive (expand only): a release at 0005 runs on this schema unchanged, so boxes are upgraded one at a time
after `inspector db upgrade` (`runs_with`). On PostgreSQL the index builds hold off writes for as long as they
take (seconds per million boards); the kiosks spool meanwhile and lose nothing.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None
runs_with = "0005"  # the oldest release schema whose code runs on this one (results/revisions.py)


def upgrade() -> None:
    op.create_index("ix_inspections_line_station_id", "inspections", ["line", "station", "id"])
    op.create_index("ix_inspections_line_station_started_at", "inspections", ["line", "station", "started_at"])
    # a board's parts by their board, with what a rate counts: a line's rates read the index alone (replaces the
    # index on inspection_id alone, which it serves too: lookups, the cascade on delete)
    op.create_index("ix_component_results_inspection_id_type_verdict", "component_results",
                    ["inspection_id", "component_type", "verdict"])
    op.drop_index("ix_component_results_inspection_id", "component_results")
    op.create_table(
        "schema_record",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("revision", sa.String(32), nullable=False),
        sa.Column("runs_with", sa.String(32), nullable=False),
        sa.Column("release", sa.String(64), nullable=False),
        sa.Column("upgraded_at", sa.DateTime(timezone=True), nullable=False),
    )
    key = sa.BigInteger().with_variant(sa.Integer, "sqlite")
    op.create_table(
        "expert_releases",
        sa.Column("id", key, primary_key=True),
        sa.Column("expert", sa.String(128), nullable=False),
        sa.Column("weights_sha256", sa.String(64), nullable=False),
        sa.Column("weights", sa.LargeBinary, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("published_by", sa.String(64), nullable=False),
        sa.Column("note", sa.Text, nullable=True),
        sa.UniqueConstraint("expert", "weights_sha256", name="uq_expert_releases_expert_weights_sha256"),
    )
    op.create_table(
        "rollout_steps",
        sa.Column("id", key, primary_key=True),
        sa.Column("rollout", sa.String(36), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("by", sa.String(64), nullable=False),
        sa.Column("expert", sa.String(128), nullable=False),
        sa.Column("line", sa.String(64), nullable=False),
        sa.Column("station", sa.String(64), nullable=False),
        sa.Column("from_sha256", sa.String(64), nullable=True),
        sa.Column("to_sha256", sa.String(64), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("detail", sa.Text, nullable=True),
    )
    op.create_index("ix_rollout_steps_rollout", "rollout_steps", ["rollout"])
    op.create_index("ix_rollout_steps_at", "rollout_steps", ["at"])


def downgrade() -> None:
    op.drop_table("rollout_steps")
    op.drop_table("expert_releases")
    op.create_index("ix_component_results_inspection_id", "component_results", ["inspection_id"])
    op.drop_index("ix_component_results_inspection_id_type_verdict", "component_results")
    op.drop_table("schema_record")
    op.drop_index("ix_inspections_line_station_started_at", "inspections")
    op.drop_index("ix_inspections_line_station_id", "inspections")
