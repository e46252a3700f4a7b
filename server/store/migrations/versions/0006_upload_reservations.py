"""uploads in flight hold a reservation that lapses: file_blobs.expires_at

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0006'
down_revision: Union[str, None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # Null on rows written before: the collector gives those the 6 hours it always did.
    with op.batch_alter_table('file_blobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('file_blobs', schema=None) as batch_op:
        batch_op.drop_column('expires_at')
