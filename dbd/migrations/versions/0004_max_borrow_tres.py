"""MaxBorrowTRES of an association (quota borrowing between sibling accounts, beyond Slurm)

Revision ID: 0004_borrow
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_borrow"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("associations") as batch:
        batch.add_column(
            sa.Column("max_borrow_tres", sa.String(length=128), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("associations") as batch:
        batch.drop_column("max_borrow_tres")
