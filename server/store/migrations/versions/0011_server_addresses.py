"""where running servers listen, for commands on their machine (chatsync link)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0011'
down_revision: Union[str, None] = '0010'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        'server_addresses',
        sa.Column('id', sa.String(length=64), nullable=False),
        sa.Column('url', sa.String(length=2000), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_server_addresses')),
    )
    with op.batch_alter_table('server_addresses', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_server_addresses_started_at'), ['started_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('server_addresses', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_server_addresses_started_at'))
    op.drop_table('server_addresses')
