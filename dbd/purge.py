"""PurgeJobAfter: forget finished jobs (and their steps) older than the configured age."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from dbd.models import Job, Step

log = logging.getLogger("shoal.dbd.purge")


def purge_jobs(session: Session, older_than: int) -> int:
    """Delete jobs that ended before `older_than` (epoch seconds); returns how many."""
    ids = list(session.scalars(select(Job.id).where(Job.end_time > 0, Job.end_time < older_than)))
    for chunk in range(0, len(ids), 900):
        part = ids[chunk : chunk + 900]
        session.execute(delete(Step).where(Step.job_row.in_(part)))
        session.execute(delete(Job).where(Job.id.in_(part)))
    return len(ids)


def purge_loop(
    sessions: sessionmaker[Session], age_s: int, stop: threading.Event, clock: Callable[[], float]
) -> None:
    while not stop.wait(60.0):
        try:
            with sessions.begin() as session:
                count = purge_jobs(session, int(clock()) - age_s)
            if count:
                log.info("purged %d job records", count)
        except Exception:  # keep serving; the next round retries
            log.exception("purge failed")
