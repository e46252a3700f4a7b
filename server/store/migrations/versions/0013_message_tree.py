"""messages form a tree: each has a parent and is on the active path or not; runs may name their own model and
the answer they continue

Existing histories become a chain: each message's parent is the message before it (by ordinal), and every
message is on the active path.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0013'
down_revision: Union[str, None] = '0012'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.add_column(sa.Column('parent_id', sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column('active', sa.Boolean(), server_default=sa.true(), nullable=False))
        batch_op.add_column(sa.Column('left_seq', sa.BigInteger(), server_default='0', nullable=False))
    # Every history so far is one line: the parent of a message is the one before it.
    op.execute(
        "UPDATE messages SET parent_id = ("
        " SELECT prev.id FROM messages AS prev"
        " WHERE prev.session_id = messages.session_id AND prev.ordinal < messages.ordinal"
        " ORDER BY prev.ordinal DESC LIMIT 1)"
    )
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.create_index('ix_messages_session_active_ordinal', ['session_id', 'active', 'ordinal'], unique=False)
        batch_op.create_index('ix_messages_session_parent', ['session_id', 'parent_id'], unique=False)
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('provider', sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column('model', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('continues_id', sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column('resumes', sa.Integer(), server_default='0', nullable=False))


def downgrade() -> None:
    # Only the active path stays: the versions that are not on it would read as one confused line.
    op.execute("DELETE FROM messages WHERE active = false")
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('resumes')
        batch_op.drop_column('continues_id')
        batch_op.drop_column('model')
        batch_op.drop_column('provider')
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_index('ix_messages_session_parent')
        batch_op.drop_index('ix_messages_session_active_ordinal')
        batch_op.drop_column('left_seq')
        batch_op.drop_column('active')
        batch_op.drop_column('parent_id')
