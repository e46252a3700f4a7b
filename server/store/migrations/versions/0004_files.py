"""uploaded files: blobs, files, references from sessions, chunks of the database backend

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0004'
down_revision: Union[str, None] = '0003'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table('file_blobs',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('user_id', sa.String(length=36), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=True),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('media_type', sa.String(length=100), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_file_blobs_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_file_blobs')),
    sa.UniqueConstraint('user_id', 'sha256', name=op.f('uq_file_blobs_user_id'))
    )
    with op.batch_alter_table('file_blobs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_file_blobs_user_id'), ['user_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_file_blobs_created_at'), ['created_at'], unique=False)

    op.create_table('files',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('user_id', sa.String(length=36), nullable=False),
    sa.Column('blob_id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('touched_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_files_user_id_users'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['blob_id'], ['file_blobs.id'], name=op.f('fk_files_blob_id_file_blobs')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_files'))
    )
    with op.batch_alter_table('files', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_files_user_id'), ['user_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_files_blob_id'), ['blob_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_files_touched_at'), ['touched_at'], unique=False)

    op.create_table('file_refs',
    sa.Column('file_id', sa.String(length=36), nullable=False),
    sa.Column('session_id', sa.String(length=36), nullable=False),
    sa.ForeignKeyConstraint(['file_id'], ['files.id'], name=op.f('fk_file_refs_file_id_files'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_file_refs_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('file_id', 'session_id', name=op.f('pk_file_refs'))
    )
    with op.batch_alter_table('file_refs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_file_refs_session_id'), ['session_id'], unique=False)

    op.create_table('file_chunks',
    sa.Column('blob_id', sa.String(length=36), nullable=False),
    sa.Column('seq', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.PrimaryKeyConstraint('blob_id', 'seq', name=op.f('pk_file_chunks'))
    )
    # What the user is told about the request an answer was made from (files given only as a placeholder).
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.add_column(sa.Column('notices', sa.JSON(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        # Chunks are mostly compressed formats already (images, PDFs): storing them uncompressed saves
        # PostgreSQL a compression attempt per row that seldom pays.
        op.execute("ALTER TABLE file_chunks ALTER COLUMN data SET STORAGE EXTERNAL")


def downgrade() -> None:
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_column('notices')
    op.drop_table('file_chunks')
    with op.batch_alter_table('file_refs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_file_refs_session_id'))
    op.drop_table('file_refs')
    with op.batch_alter_table('files', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_files_touched_at'))
        batch_op.drop_index(batch_op.f('ix_files_blob_id'))
        batch_op.drop_index(batch_op.f('ix_files_user_id'))
    op.drop_table('files')
    with op.batch_alter_table('file_blobs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_file_blobs_created_at'))
        batch_op.drop_index(batch_op.f('ix_file_blobs_user_id'))
    op.drop_table('file_blobs')
