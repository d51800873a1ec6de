"""Request bodies of v0.0.44 into shoal's messages: a job description into a JobSpec, a node update
into UpdateNode fields. Pure; a bad field is a RestError (HTTP 400) naming it, unknown ones warn."""

from __future__ import annotations

import re
import signal

from restd.errors import REST_INVALID_JOBS_DESC, REST_INVALID_QUERY, RestError
from shoal.v1 import common_pb2, jobs_pb2

SUBMIT_SOURCE = "_op_handler_submit_job"
NODE_SOURCE = "_op_handler_node"

_TEXT_FIELDS = {
    "name": "name",
    "partition": "partition",
    "account": "account",
    "qos": "qos",
    "comment": "comment",
    "standard_output": "std_out",
    "standard_error": "std_err",
    "standard_input": "std_in",
    "dependency": "dependency",
    "array": "array",
    "constraints": "constraint",
    "reservation": "reservation",
    "required_nodes": "nodelist",
    "excluded_nodes": "exclude",
    "mail_user": "mail_user",
    "wckey": "wckey",
    "licenses": "licenses",
}
_COUNT_FIELDS = {
    "tasks": "num_tasks",
    "tasks_per_node": "ntasks_per_node",
    "cpus_per_task": "cpus_per_task",
    "minimum_nodes": "min_nodes",
    "maximum_nodes": "max_nodes",
}
_HANDLED = {
    "script",
    "current_working_directory",
    "environment",
    "argv",
    "time_limit",
    "time_minimum",
    "nodes",
    "memory_per_node",
    "memory_per_cpu",
    "tres_per_node",
    "tres_per_job",
    "hold",
    "nice",
    "begin_time",
    "requeue",
    *_TEXT_FIELDS,
    *_COUNT_FIELDS,
}


def _bad(field: str, why: str) -> RestError:
    return RestError(REST_INVALID_JOBS_DESC, f"Invalid job description: {field}: {why}", SUBMIT_SOURCE)


def _number(desc: dict[str, object], field: str) -> int | None:
    """An integer or a {set, infinite, number} struct; None = not set, -2 = infinite."""
    value = desc[field]
    if isinstance(value, dict):
        if value.get("infinite"):
            return -2
        if value.get("set") is False:
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(field, "expected a non-negative integer")
    return value


def _strings(desc: dict[str, object], field: str) -> list[str]:
    value = desc[field]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(field, "expected a list of strings")
    return value


def job_spec(body: object, home: str, host: str) -> tuple[jobs_pb2.JobSpec, list[str]]:
    """The JobSpec for a POST /job/submit body ({"job": {...}} with its script), and warnings."""
    if not isinstance(body, dict):
        raise RestError(REST_INVALID_JOBS_DESC, "Invalid job description: expected an object", SUBMIT_SOURCE)
    desc = body.get("job")
    if not isinstance(desc, dict):
        raise RestError(REST_INVALID_JOBS_DESC, 'Invalid job description: missing "job"', SUBMIT_SOURCE)
    script = desc.get("script", body.get("script"))
    if not isinstance(script, str) or not script.startswith("#!"):
        raise RestError(
            REST_INVALID_JOBS_DESC, "Batch script is empty or does not start with #!", SUBMIT_SOURCE
        )
    warnings = [f"Ignoring unknown field job/{k}" for k in desc if k not in _HANDLED]
    spec = jobs_pb2.JobSpec(
        batch=True,
        time_limit_min=-1,
        time_min_min=-1,
        requeue=-1,
        script=script.encode(),
        name="sbatch",
        submit_host=host,
        export_spec="NONE",
    )
    cwd = desc.get("current_working_directory", home)
    if not isinstance(cwd, str) or not cwd.startswith("/"):
        raise _bad("current_working_directory", "expected an absolute path")
    spec.work_dir = spec.submit_dir = cwd
    for field, attr in _TEXT_FIELDS.items():
        if field in desc:
            if not isinstance(desc[field], str):
                raise _bad(field, "expected a string")
            setattr(spec, attr, desc[field])
    spec.qos = spec.qos.lower()
    for field, attr in _COUNT_FIELDS.items():
        if field in desc:
            number = _number(desc, field)
            if number is not None and number >= 0:
                setattr(spec, attr, number)
    if "environment" in desc:
        for item in _strings(desc, "environment"):
            key, eq, value = item.partition("=")
            if not eq or not key:
                raise _bad("environment", f"{item!r} is not NAME=value")
            spec.environment[key] = value
    if "argv" in desc:
        spec.argv.extend(_strings(desc, "argv"))
    for field, attr in (("time_limit", "time_limit_min"), ("time_minimum", "time_min_min")):
        if field in desc:
            number = _number(desc, field)
            if number is not None:
                setattr(spec, attr, number)
    for field, attr in (("memory_per_node", "mem_per_node_mb"), ("memory_per_cpu", "mem_per_cpu_mb")):
        if field in desc:
            number = _number(desc, field)
            if number is not None and number >= 0:
                setattr(spec, attr, number)
    if "nodes" in desc:
        nodes = desc["nodes"]
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", nodes) if isinstance(nodes, str) else None
        if not match:
            raise _bad("nodes", "expected a node count or range (2, 1-4)")
        spec.min_nodes = int(match.group(1))
        spec.max_nodes = int(match.group(2) or match.group(1))
    for field in ("tres_per_node", "tres_per_job"):
        if field in desc:
            value = desc[field]
            match = (
                re.fullmatch(r"gres/gpu(?::([\w-]+))?[:=](\d+)", value) if isinstance(value, str) else None
            )
            if not match:
                raise _bad(field, "only gres/gpu[:type]=N is supported")
            gpus = f"{match.group(1)}:{match.group(2)}" if match.group(1) else match.group(2)
            if field == "tres_per_node":
                spec.gpus_per_node = gpus
            else:
                spec.gpus = gpus
    if "hold" in desc:
        spec.hold = desc["hold"] is True
    if "requeue" in desc:
        spec.requeue = 1 if desc["requeue"] is True else 0
    if "nice" in desc:
        nice = desc["nice"]
        if isinstance(nice, bool) or not isinstance(nice, int):
            raise _bad("nice", "expected an integer")
        spec.nice = nice
    if "begin_time" in desc:
        begin = _number(desc, "begin_time")
        spec.begin_time = begin if begin and begin > 0 else 0
    return spec, warnings


def signal_number(text: str) -> int:
    """DELETE /job/{id}?signal=: a name (TERM, SIGTERM) or a number; absent = SIGKILL (cancel)."""
    if not text:
        return 0
    if text.isdigit():
        return int(text)
    name = text.upper()
    try:
        return int(signal.Signals[name if name.startswith("SIG") else f"SIG{name}"])
    except KeyError as exc:
        raise RestError(REST_INVALID_QUERY, f"Unknown signal {text}", "_op_handler_job") from exc


_NODE_STATES = {
    "DRAIN": "DRAIN",
    "RESUME": "RESUME",
    "UNDRAIN": "UNDRAIN",
    "DOWN": "DOWN",
    "IDLE": "IDLE",
    "FAIL": "FAIL",
    "FUTURE": "FUTURE",
    "POWER_DOWN": "POWER_DOWN",
    "POWER_UP": "POWER_UP",
    # v0.0.44's enum names the flag REBOOT_CANCELED; scontrol's word CANCEL_REBOOT is taken too
    "REBOOT_CANCELED": "CANCEL_REBOOT",
    "CANCEL_REBOOT": "CANCEL_REBOOT",
}


def node_update(body: object) -> list[common_pb2.KeyValue]:
    """UpdateNode fields for a POST /node/{name} body: state (a list, as v0.0.44 has it) and reason."""
    if not isinstance(body, dict):
        raise RestError(REST_INVALID_QUERY, "Invalid node update: expected an object", NODE_SOURCE)
    fields: list[common_pb2.KeyValue] = []
    states = body.get("state", [])
    if isinstance(states, str):
        states = [states]
    if not isinstance(states, list) or len(states) > 1 or not all(isinstance(s, str) for s in states):
        raise RestError(REST_INVALID_QUERY, "Invalid node update: state must name one state", NODE_SOURCE)
    state = states[0].upper() if states else ""
    if state and state not in _NODE_STATES:
        raise RestError(REST_INVALID_QUERY, f"Invalid node state specified: {states[0]}", NODE_SOURCE)
    reason = body.get("reason", "")
    if not isinstance(reason, str):
        raise RestError(REST_INVALID_QUERY, "Invalid node update: reason must be a string", NODE_SOURCE)
    if state in ("DRAIN", "DOWN", "FAIL") and not reason:
        raise RestError(
            REST_INVALID_QUERY, "You must specify a reason when DOWNING or DRAINING a node", NODE_SOURCE
        )
    if state:
        fields.append(common_pb2.KeyValue(key="State", value=_NODE_STATES[state]))
    if reason:
        fields.append(common_pb2.KeyValue(key="Reason", value=reason))
    if not fields:
        raise RestError(REST_INVALID_QUERY, "No changes specified", NODE_SOURCE)
    return fields
