"""GPUs of the cluster, CPUs and GPUs of a node event (sreport's Down time and -T gres/gpu)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

COLUMNS = [("clusters", "gpus"), ("node_events", "cpus"), ("node_events", "gpus")]


def upgrade() -> None:
    for table, column in COLUMNS:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column(column, sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    for table, column in reversed(COLUMNS):
        with op.batch_alter_table(table) as batch:
            batch.drop_column(column)
