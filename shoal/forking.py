"""Forking a warm, single-threaded server's child to do one piece of work.

The command runner (cli/runner.py) and noded's stepd fork server (noded/stepd_spawn.py) both keep
their modules imported and fork per request, so that a request costs a fork, not an interpreter.
"""

from __future__ import annotations

import os
from collections.abc import Callable


def fork_child(body: Callable[[], int], failure: int = 1) -> int:
    """Fork; the child runs `body` and exits with its result (`failure` if it raises) without
    returning here, the parent gets the child's pid. Only for single-threaded callers."""
    pid = os.fork()
    if pid == 0:
        code = failure
        try:
            code = body()
        finally:
            os._exit(code)
    return pid
