"""deleted sessions are purged (an index to find them); exactly-once records are numbered per user

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0009'
down_revision: Union[str, None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('request_seq', sa.BigInteger(), server_default='0', nullable=False))
    # Records written before have seq 0: they hold whole replies, and age out within 25 hours.
    with op.batch_alter_table('client_requests', schema=None) as batch_op:
        batch_op.add_column(sa.Column('seq', sa.BigInteger(), server_default='0', nullable=False))
        batch_op.create_index('ix_client_requests_user_seq', ['user_id', 'seq'], unique=False)
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sessions_deleted_at'), ['deleted_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sessions_deleted_at'))
    with op.batch_alter_table('client_requests', schema=None) as batch_op:
        batch_op.drop_index('ix_client_requests_user_seq')
        batch_op.drop_column('seq')
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('request_seq')
