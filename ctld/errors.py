"""Errors the controller returns to a caller: a gRPC status code number and Slurm's words."""

from __future__ import annotations

# gRPC status code numbers (kept as ints so the controller's logic does not import grpc).
INVALID_ARGUMENT = 3
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
UNAVAILABLE = 14


class SlurmError(Exception):
    """A refusal with a user-facing message in Slurm's words ("Invalid job id specified")."""

    def __init__(self, message: str, code: int = INVALID_ARGUMENT) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


INVALID_JOB_ID = "Invalid job id specified"
ACCESS_DENIED = "Access/permission denied"
JOB_PENDING = "Job is pending execution"
ALREADY_DONE = "Job/step already completing or completed"
NOT_NOW = "Job can not be altered now, try again later"  # a signal other than KILL to a pending job
INVALID_PARTITION = "Invalid partition name specified"
NODE_CONFIG_UNAVAILABLE = "Requested node configuration is not available"
INVALID_GRES = "Invalid generic resource (gres) specification"
DEPENDENCY_PROBLEM = "Job dependency problem"
INVALID_NODE_NAME = "Invalid node name specified"
INVALID_NODE_STATE = "Invalid node state specified"
INVALID_USER = "Invalid user id"  # slurmctld's answer to a user's operator-only request
NODE_COUNT_INVALID = "Node count specification invalid"
