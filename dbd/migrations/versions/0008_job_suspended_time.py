"""Suspended time of jobs (scontrol suspend/resume): sacct Suspended, and Elapsed without it

Revision ID: 0008_job_suspended_time
Revises: 0007_qos_max_tres_per_user
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_job_suspended_time"
down_revision = "0007_qos_max_tres_per_user"
branch_labels = None
depends_on = None

COLUMNS = ("suspended_secs", "suspend_time")


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for column in COLUMNS:
            batch.add_column(sa.Column(column, sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for column in reversed(COLUMNS):
            batch.drop_column(column)
