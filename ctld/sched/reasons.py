"""Why a job waits: the pending-reason words squeue and scontrol show, each declared once, as Slurm says them.

The limits of associations and QOS (AssocGrpCpuLimit, QOSMaxGRESPerJob ...) are declared with their
checks in assoc_limits.py; everything else a job can wait for is here, for the core and the controller.
"""

from __future__ import annotations

NONE = "None"  # running, or nothing holds it back

# the scheduler's verdicts (cycle.py, backfill.py, placement.py)
PRIORITY = "Priority"  # higher-priority jobs go first
RESOURCES = "Resources"  # not enough free now
REQ_NODE_NOT_AVAIL = "ReqNodeNotAvail"  # a node it asked for (-w) cannot be used
ARRAY_TASK_LIMIT = "JobArrayTaskLimit"  # --array=...%N: N tasks already run

# the job itself or its user
HELD_ADMIN = "JobHeldAdmin"
HELD_USER = "JobHeldUser"
LAUNCH_FAILURE = "JobLaunchFailure"  # the batch script could not be started (its -o file, say)
REQUEUED_HELD = "job requeued in held state"  # scontrol requeuehold (22.05: until released)
BEGIN_TIME = "BeginTime"  # --begin in the future, or a requeued job's wait
DEPENDENCY = "Dependency"
DEPENDENCY_NEVER = "DependencyNeverSatisfied"
BAD_CONSTRAINTS = "BadConstraints"  # the request cannot be read against this configuration

# partitions (limits.py)
PARTITION_CONFIG = "PartitionConfig"
PARTITION_DOWN = "PartitionDown"  # also: the job's partitions were removed from the configuration
PARTITION_INACTIVE = "PartitionInactive"
PARTITION_NODE_LIMIT = "PartitionNodeLimit"
PARTITION_TIME_LIMIT = "PartitionTimeLimit"

# reservations (reservations.py)
RESERVATION = "Reservation"  # the job's reservation has not started yet
RESERVATION_DELETED = "ReservationDeleted"
RESERVED_FOR_MAINT = "ReqNodeNotAvail, Reserved for maintenance"  # Slurm says so for any reservation
MAY_BE_RESERVED = "ReqNodeNotAvail, May be reserved for other job"

# why an ended job ended, as its Reason shows it
TIME_LIMIT = "TimeLimit"
NODE_DOWN = "NodeDown"
NON_ZERO_EXIT_CODE = "NonZeroExitCode"
RAISED_SIGNAL = "RaisedSignal"  # FAILED by a signal, exit code 0
OUT_OF_MEMORY = "OutOfMemory"
