"""sessions: the MCP servers a session uses and its settings for them

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0012'
down_revision: Union[str, None] = '0011'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # Constant defaults: adding them rewrites no rows on PostgreSQL 11+ and SQLite.
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('mcp_servers', sa.JSON(), server_default='[]', nullable=False))
        batch_op.add_column(sa.Column('mcp_tools', sa.JSON(), server_default='{}', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_column('mcp_tools')
        batch_op.drop_column('mcp_servers')
