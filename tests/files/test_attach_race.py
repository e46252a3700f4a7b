"""A file enqueued into one session while the session that carried it is deleted: the enqueue is either
acknowledged and the file kept, or refused with ``NOT_FOUND``; never an error, never a lost file."""

from __future__ import annotations

from typing import Any

import pytest
from file_helpers import download
from scenario_kit import attach_while_deleting


@pytest.mark.timeout(600)  # 60 rounds: well under a minute on two free cores
async def test_enqueue_racing_a_delete_never_loses_the_file(db_url: str, server_factory: Any) -> None:
    # The collector and the purge of deleted sessions run all the time: they race the enqueues too.
    live = await server_factory(
        db_url, file_sweep_seconds=0.2, deleted_session_retention_seconds=0, purge_sweep_seconds=0.2
    )
    acknowledged, wrong = await attach_while_deleting([live.url], live.tokens["alice"], db_url, 60)
    assert wrong == []
    await live.services.files.collect()
    assert [(await download(live, fid)).status_code for fid in acknowledged] == [200] * len(acknowledged)
