"""Files across replicas under races: a file enqueued into one session on one replica while the session that
carried it is deleted on another is either kept (the enqueue was acknowledged) or refused with ``NOT_FOUND``."""

from __future__ import annotations

import pytest
from scenario_kit import attach_while_deleting


@pytest.mark.timeout(600)  # 60 rounds: under a minute on two free cores
async def test_enqueue_racing_a_delete_on_another_replica_never_loses_the_file(cluster_factory):
    # The collector and the purge of deleted sessions run all the time on both replicas: they race too.
    cluster = await cluster_factory(
        2,
        CHATSYNC_FILES_URL="database:",
        CHATSYNC_FILE_SWEEP_SECONDS="0.2",
        CHATSYNC_DELETED_SESSION_RETENTION_SECONDS="0",
        CHATSYNC_PURGE_SWEEP_SECONDS="0.2",
    )
    _acknowledged, wrong = await attach_while_deleting(cluster.urls, cluster.tokens["alice"], cluster.database_url, 60)
    assert wrong == []
