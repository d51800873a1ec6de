"""Usage limits of associations and QOS: GrpTRESMins, GrpTRESRunMins, GrpWall, MaxTRESMinsPerJob

Revision ID: 0005_limit_minutes
Revises: 0004_borrow
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_limit_minutes"
down_revision = "0004_borrow"
branch_labels = None
depends_on = None

TABLES = ("associations", "qos")
TEXT_COLUMNS = ("grp_tres_mins", "grp_tres_run_mins", "max_tres_mins_per_job")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            for column in TEXT_COLUMNS:
                batch.add_column(sa.Column(column, sa.String(128), nullable=False, server_default=""))
            batch.add_column(sa.Column("grp_wall_min", sa.BigInteger(), nullable=False, server_default="-1"))


def downgrade() -> None:
    for table in reversed(TABLES):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("grp_wall_min")
            for column in reversed(TEXT_COLUMNS):
                batch.drop_column(column)
