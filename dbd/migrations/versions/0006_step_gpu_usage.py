"""GPU usage of steps: mean/peak utilization and peak memory (sacct TRESUsageInAve/Max gres terms)

Revision ID: 0006_step_gpu_usage
Revises: 0005_limit_minutes
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_step_gpu_usage"
down_revision = "0005_limit_minutes"
branch_labels = None
depends_on = None

COLUMNS = ("gpu_util_avg", "gpu_util_max", "gpu_mem_max_mb")


def upgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        for column in COLUMNS:
            batch.add_column(sa.Column(column, sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        for column in reversed(COLUMNS):
            batch.drop_column(column)
