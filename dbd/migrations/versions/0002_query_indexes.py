"""indexes for sacct's and sreport's queries

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

INDEXES = [
    ("ix_jobs_cluster_submit", "jobs", ["cluster", "submit_time"]),
    ("ix_jobs_cluster_user", "jobs", ["cluster", "user"]),
    ("ix_jobs_cluster_account", "jobs", ["cluster", "account"]),
    ("ix_usage_cluster_hour", "usage_hourly", ["cluster", "hour"]),
    ("ix_events_cluster_time", "node_events", ["cluster", "start_time"]),
]


def upgrade() -> None:
    for name, table, columns in INDEXES:
        op.create_index(name, table, columns, unique=False)


def downgrade() -> None:
    for name, table, _ in reversed(INDEXES):
        op.drop_index(name, table_name=table)
