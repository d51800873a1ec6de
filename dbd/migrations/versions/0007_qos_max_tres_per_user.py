"""QOS MaxTRESPerUser (MaxTRESPU): the TRES one user's running jobs in the QOS may hold

Revision ID: 0007_qos_max_tres_per_user
Revises: 0006_step_gpu_usage
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_qos_max_tres_per_user"
down_revision = "0006_step_gpu_usage"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("qos") as batch:
        batch.add_column(sa.Column("max_tres_per_user", sa.String(128), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("qos") as batch:
        batch.drop_column("max_tres_per_user")
