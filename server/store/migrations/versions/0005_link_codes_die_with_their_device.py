"""sign-in links: an id, the device that made them, revocation

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0005'
down_revision: Union[str, None] = '0004'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # Codes made before this revision do not know the device that made them, so they could not die with it:
    # they go. They live ten minutes and are made again in a click; nobody is signed out.
    op.execute(sa.text("DELETE FROM link_codes"))
    with op.batch_alter_table('link_codes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('id', sa.String(length=36), nullable=False))
        batch_op.add_column(sa.Column('made_by', sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.create_unique_constraint(batch_op.f('uq_link_codes_id'), ['id'])
        batch_op.create_index(batch_op.f('ix_link_codes_made_by'), ['made_by'], unique=False)
        batch_op.create_foreign_key(
            batch_op.f('fk_link_codes_made_by_api_tokens'), 'api_tokens', ['made_by'], ['id'], ondelete='CASCADE'
        )


def downgrade() -> None:
    with op.batch_alter_table('link_codes', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_link_codes_made_by_api_tokens'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_link_codes_made_by'))
        batch_op.drop_constraint(batch_op.f('uq_link_codes_id'), type_='unique')
        batch_op.drop_column('revoked_at')
        batch_op.drop_column('made_by')
        batch_op.drop_column('id')
