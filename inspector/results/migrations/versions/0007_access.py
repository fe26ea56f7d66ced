"""who did what: users and their API tokens, the audit trail, every rule set's text under its hash

Additive (expand only): a release at 0005 or 0006 runs on this schema unchanged. This release needs it (users are
checked on every change), so `inspector db upgrade` comes before the first box of this release.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None
runs_with = "0005"  # the oldest release schema whose code runs on this one (results/revisions.py)


def upgrade() -> None:
    key = sa.BigInteger().with_variant(sa.Integer, "sqlite")
    when = sa.DateTime(timezone=True)
    op.create_table(
        "users",
        sa.Column("id", key, primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("password_hash", sa.String(256), nullable=False),
        sa.Column("created_at", when, nullable=False),
        sa.Column("disabled_at", when, nullable=True),
        sa.UniqueConstraint("name", name="uq_users_name"),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", key, primary_key=True),
        sa.Column("key", sa.String(16), nullable=False),
        sa.Column("secret_sha256", sa.String(64), nullable=False),
        sa.Column("user_id", key, sa.ForeignKey("users.id", name="fk_api_tokens_user_id_users"), nullable=False),
        sa.Column("label", sa.String(128), nullable=False),
        sa.Column("created_at", when, nullable=False),
        sa.Column("expires_at", when, nullable=True),
        sa.Column("revoked_at", when, nullable=True),
        sa.UniqueConstraint("key", name="uq_api_tokens_key"),
    )
    op.create_table(
        "audit_events",
        sa.Column("id", key, primary_key=True),
        sa.Column("at", when, nullable=False),
        sa.Column("actor", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("origin", sa.String(256), nullable=False),
        sa.Column("line", sa.String(64), nullable=False),
        sa.Column("station", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("subject", sa.String(256), nullable=False),
        sa.Column("before", sa.Text, nullable=True),
        sa.Column("after", sa.Text, nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("prev_sha256", sa.String(64), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.UniqueConstraint("prev_sha256", name="uq_audit_events_prev_sha256"),
    )
    op.create_index("ix_audit_events_at", "audit_events", ["at"])
    if op.get_bind().dialect.name == "postgresql":  # append-only for the boxes' role (installer/postgres-roles.sql)
        op.execute("DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'inspector_writer') THEN "
                   "REVOKE UPDATE, DELETE, TRUNCATE ON audit_events FROM inspector_writer; END IF; END $$")
    op.create_index("ix_audit_events_kind", "audit_events", ["kind"])
    op.create_table(
        "rule_texts",
        sa.Column("version", sa.String(12), primary_key=True),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("recipe", sa.String(128), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("first_seen", when, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rule_texts")
    op.drop_index("ix_audit_events_kind", "audit_events")
    op.drop_index("ix_audit_events_at", "audit_events")
    op.drop_table("audit_events")
    op.drop_table("api_tokens")
    op.drop_table("users")
