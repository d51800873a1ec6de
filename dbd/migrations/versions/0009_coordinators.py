"""Account coordinators (sacctmgr add coordinator account=X names=U)

Revision ID: 0009_coordinators
Revises: 0008_job_suspended_time
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_coordinators"
down_revision = "0008_job_suspended_time"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "coordinators",
        sa.Column("user", sa.String(128), primary_key=True),
        sa.Column("account", sa.String(128), primary_key=True),
    )


def downgrade() -> None:
    op.drop_table("coordinators")
