"""A stand-in for a shoal-ctld that leads through the lease: take it, then write to the store in a loop.

Run by test_leader.py as a real process (so it can be SIGSTOPped). One line per event on stdout:
LEADER <epoch>, TRY <job id>, WROTE <job id>, ERROR <message>, LOST (the renewal found the lease
gone), FENCED <message> (a write refused; then exit 3).
"""

from __future__ import annotations

import sys
import threading
import time

from ctld.leader import Lease, wait_for_lease
from ctld.store import FencedError, StateStore, StoreError
from ctld.store_mariadb import MariaDBBackend
from shoal.conf.statestore import StateStoreConf

_SAY = threading.Lock()


def say(line: str) -> None:
    """One whole line per write: print() writes the text and the newline separately, so a line
    from the renewal thread (or a log record on the shared stderr) could land between them."""
    with _SAY:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main() -> int:
    host, port, database, holder, timeout, mode, base = sys.argv[1:8]
    conf = StateStoreConf(
        kind="mysql", user="root", host=host, port=int(port), database=database, lease_timeout=int(timeout)
    )
    lease = Lease(conf, "", holder=holder)
    stop = threading.Event()
    wait_for_lease(lease, stop, poll=0.2)
    assert lease.epoch is not None
    store = StateStore(backend=MariaDBBackend(conf, ""))
    store.fence(lease.epoch)
    say(f"LEADER {lease.epoch}")
    threading.Thread(target=lease.keep, args=(stop, lambda: say("LOST")), daemon=True).start()
    job_id = int(base)
    while True:
        job_id += 1
        say(f"TRY {job_id}")
        try:
            with store.transaction() as tx:
                tx.put_job(job_id, holder.encode())
                if mode == "in-tx":  # a slow transaction: a SIGSTOP lands inside one
                    time.sleep(0.3)
            say(f"WROTE {job_id}")
        except FencedError as exc:
            say(f"FENCED {exc}")
            return 3
        except StoreError as exc:
            say(f"ERROR {exc}")
        time.sleep(0.05)


if __name__ == "__main__":
    raise SystemExit(main())
