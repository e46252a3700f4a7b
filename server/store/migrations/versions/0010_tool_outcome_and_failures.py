"""tool results say how the call ended; unfinished answers keep why, and who stopped them

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0010'
down_revision: Union[str, None] = '0009'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.add_column(sa.Column('outcome', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('error', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('stopped_by', sa.JSON(), nullable=True))
    # Results stored before carry only is_error; their texts tell a denial and an unknown tool apart.
    op.execute(
        "UPDATE messages SET outcome = CASE"
        " WHEN NOT is_error THEN 'ok'"
        " WHEN content LIKE 'The user denied this tool call.%' THEN 'denied'"
        " WHEN content LIKE 'Unknown tool %' OR content LIKE 'No server tool named %' THEN 'unknown-tool'"
        " ELSE 'error' END"
        " WHERE role = 'tool'"
    )


def downgrade() -> None:
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_column('stopped_by')
        batch_op.drop_column('error')
        batch_op.drop_column('outcome')
