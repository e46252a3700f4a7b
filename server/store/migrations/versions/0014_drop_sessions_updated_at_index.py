"""sessions.updated_at is no longer indexed: no query reads the sessions in that order (the list is ordered by
pinned, then created_at), and every write to a session moved its entry in the index (two pages of a SQLite
transaction, an index entry more per row version on PostgreSQL)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27
"""
from typing import Sequence, Union

from alembic import op


revision: str = '0014'
down_revision: Union[str, None] = '0013'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sessions_updated_at'))


def downgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sessions_updated_at'), ['updated_at'], unique=False)
