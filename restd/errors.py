"""REST errors in slurmrestd's shape: an HTTP status plus one `errors` entry (Slurm's errno and words)."""

from __future__ import annotations

from dataclasses import dataclass

# Slurm's error numbers (slurm_errno.h) for the failures restd reports.
SLURM_ERROR = -1
AUTHENTICATION_ERROR = 1007  # SLURM_PROTOCOL_AUTHENTICATION_ERROR
INVALID_PARTITION = 2000
ACCESS_DENIED = 2002
USER_ID_MISSING = 2010
INVALID_JOB_ID = 2017
INVALID_NODE_NAME = 2018
ALREADY_DONE = 2021
CONTROLLER_DOWN = 1800  # SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR
DBD_DOWN = 7000  # ESLURM_DB_CONNECTION
REST_INVALID_QUERY = 9000
REST_FAIL_PARSING = 9001
REST_INVALID_JOBS_DESC = 9002

_STATUS = {
    AUTHENTICATION_ERROR: 401,
    ACCESS_DENIED: 403,
    USER_ID_MISSING: 403,
    INVALID_JOB_ID: 404,
    INVALID_NODE_NAME: 404,
    REST_INVALID_QUERY: 400,
    REST_FAIL_PARSING: 400,
    REST_INVALID_JOBS_DESC: 400,
}

# ctld's and dbd's messages (Slurm's words) -> Slurm's error number
BY_MESSAGE = {
    "Invalid job id specified": INVALID_JOB_ID,
    "Access/permission denied": ACCESS_DENIED,
    "Invalid user id": USER_ID_MISSING,
    "Invalid node name specified": INVALID_NODE_NAME,
    "Invalid partition name specified": INVALID_PARTITION,
    "Job/step already completing or completed": ALREADY_DONE,
}


@dataclass
class RestError(Exception):
    """A refused request; `source` names where it was found (slurmrestd names its function)."""

    number: int
    message: str
    source: str
    description: str = ""

    @property
    def status(self) -> int:
        return _STATUS.get(self.number, 500)

    def entry(self) -> dict[str, object]:
        return {
            "description": self.description or self.message,
            "error_number": self.number,
            "error": self.message,
            "source": self.source,
        }


def from_daemon(message: str, source: str, *, unavailable: bool = False, dbd: bool = False) -> RestError:
    """A daemon's refusal (its message is already in Slurm's words) as a RestError."""
    if unavailable:
        return RestError(DBD_DOWN if dbd else CONTROLLER_DOWN, message, source)
    return RestError(BY_MESSAGE.get(message, SLURM_ERROR), message, source)
