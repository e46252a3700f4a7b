"""devices, link codes, client requests, session feed

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0003'
down_revision: Union[str, None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table('client_requests',
    sa.Column('user_id', sa.String(length=36), nullable=False),
    sa.Column('request_id', sa.String(length=64), nullable=False),
    sa.Column('procedure', sa.String(length=64), nullable=False),
    sa.Column('input_hash', sa.String(length=64), nullable=False),
    sa.Column('result', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_client_requests_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('user_id', 'request_id', name=op.f('pk_client_requests'))
    )
    with op.batch_alter_table('client_requests', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_client_requests_created_at'), ['created_at'], unique=False)

    op.create_table('link_codes',
    sa.Column('code_hash', sa.String(length=64), nullable=False),
    sa.Column('user_id', sa.String(length=36), nullable=False),
    sa.Column('device_name', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('used_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_link_codes_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('code_hash', name=op.f('pk_link_codes'))
    )
    with op.batch_alter_table('link_codes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_link_codes_expires_at'), ['expires_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_link_codes_user_id'), ['user_id'], unique=False)

    op.create_table('user_events',
    sa.Column('user_id', sa.String(length=36), nullable=False),
    sa.Column('seq', sa.BigInteger(), autoincrement=False, nullable=False),
    sa.Column('type', sa.String(length=48), nullable=False),
    sa.Column('payload', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_user_events_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('user_id', 'seq', name=op.f('pk_user_events'))
    )
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.add_column(sa.Column('name', sa.String(length=200), server_default='', nullable=False))
        batch_op.add_column(sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f('ix_api_tokens_revoked_at'), ['revoked_at'], unique=False)

    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.add_column(sa.Column('client_request_id', sa.String(length=64), nullable=True))

    with op.batch_alter_table('queued_messages', schema=None) as batch_op:
        batch_op.add_column(sa.Column('client_request_id', sa.String(length=64), nullable=True))

    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('abort_then_send', sa.Boolean(), server_default=sa.false(), nullable=False))

    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('feed_seq', sa.BigInteger(), server_default='0', nullable=False))



def downgrade() -> None:
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('feed_seq')

    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_column('abort_then_send')

    with op.batch_alter_table('queued_messages', schema=None) as batch_op:
        batch_op.drop_column('client_request_id')

    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_column('client_request_id')

    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_tokens_revoked_at'))
        batch_op.drop_column('revoked_at')
        batch_op.drop_column('last_used_at')
        batch_op.drop_column('name')

    op.drop_table('user_events')
    with op.batch_alter_table('link_codes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_link_codes_user_id'))
        batch_op.drop_index(batch_op.f('ix_link_codes_expires_at'))

    op.drop_table('link_codes')
    with op.batch_alter_table('client_requests', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_client_requests_created_at'))

    op.drop_table('client_requests')
