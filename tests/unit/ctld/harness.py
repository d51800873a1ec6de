"""A controller harness: the real Controller and state store, a steppable clock, node agents as data.

Nothing here fakes shoal itself. The node agents are the one external thing: `RecordingNodes` keeps
every launch, terminate, signal and ping as a value, so a test reads what ctld asked of its nodes the
way a table row reads (`h.effects() == [Launch("n1", 1)]`). The clock moves only when the test says
so, which makes time limits, SlurmdTimeout and MinJobAge testable in milliseconds.

    h = Harness.of(cluster().nodes(2, cpus=4))
    job = h.submit(job().cpus(2).time(1))
    h.schedule()
    h.advance(61); h.tick()
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ctld.actions import LaunchFailed, PingAnswer, PrologDone
from ctld.controller import Caller, Controller
from ctld.store import StateStore
from shoal import states
from shoal.conf.slurm import parse_slurm_conf
from shoal.v1 import cluster_pb2, common_pb2, controller_pb2, jobs_pb2, node_pb2

ROOT = Caller(uid=0, gid=0, host="login")
START = 1_800_000_000.0  # the harness clock's epoch: a fixed, recognisable wall time


# ---------------------------------------------------------------- what ctld asked of its nodes


@dataclass(frozen=True)
class Launch:
    node: str
    job_id: int


@dataclass(frozen=True)
class Terminate:
    node: str
    job_id: int
    reason: str


@dataclass(frozen=True)
class Signal:
    node: str
    job_id: int
    signal: int
    batch_only: bool  # the batch shell alone (scancel -b, --signal=B:...)
    full: bool = False  # the shell's whole group and every step (scancel -f)


@dataclass(frozen=True)
class LaunchTasks:
    node: str
    job_id: int
    step_id: int


@dataclass(frozen=True)
class SignalStep:
    node: str
    job_id: int
    step_id: int
    signal: int


@dataclass(frozen=True)
class Suspend:
    node: str
    job_id: int
    suspend: bool  # False: resume


@dataclass(frozen=True)
class RunProlog:
    node: str
    job_id: int
    contain: bool = False  # PrologFlags=Contain: the extern container too


@dataclass(frozen=True)
class Reboot:
    node: str  # ctld issued its reboot: its noded runs RebootProgram


Effect = Launch | Terminate | Signal | LaunchTasks | SignalStep | Suspend | RunProlog | Reboot


@dataclass
class RecordingNodes:
    """ctld's NodeActions, kept as data; pings are counted apart (they are the clock's business)."""

    effects: list[Effect] = field(default_factory=list)
    pings: list[str] = field(default_factory=list)
    reconfigured: list[str] = field(default_factory=list)  # nodes told to re-read their files
    launch_requests: dict[int, node_pb2.LaunchBatchRequest] = field(default_factory=dict)
    running: dict[str, set[int]] = field(default_factory=dict)  # what each node would say it runs
    unanswered: list[tuple[str, PingAnswer]] = field(default_factory=list)  # pings the harness answers
    prologs: dict[tuple[str, int], PrologDone] = field(default_factory=dict)  # RunProlog calls not answered

    def launch(
        self, node: cluster_pb2.NodeInfo, request: node_pb2.LaunchBatchRequest, on_failure: LaunchFailed
    ) -> None:
        self.effects.append(Launch(node.name, request.job.job_id))
        self.launch_requests[request.job.job_id] = request
        self.running.setdefault(node.name, set()).add(request.job.job_id)

    def terminate(self, node: cluster_pb2.NodeInfo, job_id: int, kill_wait: int, reason: str) -> None:
        self.effects.append(Terminate(node.name, job_id, reason))

    def signal(
        self, node: cluster_pb2.NodeInfo, job_id: int, signal: int, batch_only: bool, full: bool = False
    ) -> None:
        self.effects.append(Signal(node.name, job_id, signal, batch_only, full))

    def ping(self, node: cluster_pb2.NodeInfo, ctld_start_time: int, on_answer: PingAnswer) -> None:
        self.pings.append(node.name)
        self.unanswered.append((node.name, on_answer))

    def launch_tasks(self, node: cluster_pb2.NodeInfo, request: node_pb2.LaunchTasksRequest) -> str:
        self.effects.append(LaunchTasks(node.name, request.job.job_id, request.step.step_id))
        return ""

    def signal_step(self, node: cluster_pb2.NodeInfo, job_id: int, step_id: int, signal: int) -> None:
        self.effects.append(SignalStep(node.name, job_id, step_id, signal))

    def suspend(self, node: cluster_pb2.NodeInfo, job_id: int, suspend: bool) -> None:
        self.effects.append(Suspend(node.name, job_id, suspend))

    def reconfigure(self, node: cluster_pb2.NodeInfo) -> None:
        self.reconfigured.append(node.name)

    def run_prolog(
        self, node: cluster_pb2.NodeInfo, request: node_pb2.RunPrologRequest, on_done: PrologDone
    ) -> None:
        self.effects.append(RunProlog(node.name, request.job.job_id, request.contain))
        self.prologs[(node.name, request.job.job_id)] = on_done

    def reboot(self, node: cluster_pb2.NodeInfo) -> None:
        self.effects.append(Reboot(node.name))


@dataclass
class Clock:
    """Wall time that moves only when a test moves it."""

    now: float = START

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# ---------------------------------------------------------------- builders


@dataclass
class ClusterBuilder:
    """A slurm.conf as data: `cluster().nodes(4, cpus=16, gpus=8).partition("debug", "n[1-2]")`."""

    node_lines: list[str] = field(default_factory=list)
    partition_lines: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)

    def nodes(
        self, count: int, cpus: int = 4, mem: int = 8000, gpus: int = 0, prefix: str = "n"
    ) -> ClusterBuilder:
        first = len(self.names) + 1
        names = [f"{prefix}{i}" for i in range(first, first + count)]
        gres = f" Gres=gpu:h100:{gpus}" if gpus else ""
        self.node_lines += [f"NodeName={n} CPUs={cpus} RealMemory={mem}{gres}" for n in names]
        self.names += names
        return self

    def partition(self, name: str, nodes: str, **options: str) -> ClusterBuilder:
        extra = "".join(f" {k}={v}" for k, v in options.items())
        self.partition_lines.append(f"PartitionName={name} Nodes={nodes}{extra}")
        return self

    def set(self, **keys: str | int) -> ClusterBuilder:
        self.keys.update({k: str(v) for k, v in keys.items()})
        return self

    def text(self, state_dir: Path) -> str:
        partitions = self.partition_lines or [f"PartitionName=batch Nodes={','.join(self.names)} Default=YES"]
        keys = {
            "ClusterName": "t",
            "SlurmctldHost": "localhost",
            "StateSaveLocation": str(state_dir),
            "SlurmdTimeout": "60",
            "KillWait": "5",
            "MinJobAge": "300",
            **self.keys,
        }
        return "".join(f"{k}={v}\n" for k, v in keys.items()) + "".join(
            f"{line}\n" for line in (*self.node_lines, *partitions)
        )


def cluster() -> ClusterBuilder:
    return ClusterBuilder()


@dataclass
class JobBuilder:
    """A JobSpec as sbatch would send it: `job().nodes(2).cpus(4).time(10).requeue()`; unset = not given."""

    spec: jobs_pb2.JobSpec = field(
        default_factory=lambda: jobs_pb2.JobSpec(
            batch=True,
            script=b"#!/bin/sh\ntrue\n",
            work_dir="/tmp",
            name="job",
            time_limit_min=-1,
            requeue=-1,
        )
    )

    def nodes(self, count: int) -> JobBuilder:
        self.spec.min_nodes = self.spec.max_nodes = count
        return self

    def tasks(self, count: int) -> JobBuilder:
        self.spec.num_tasks = count
        return self

    def cpus(self, per_task: int) -> JobBuilder:
        self.spec.cpus_per_task = per_task
        return self

    def time(self, minutes: int) -> JobBuilder:
        self.spec.time_limit_min = minutes
        return self

    def requeue(self, allowed: bool = True) -> JobBuilder:
        """--requeue / --no-requeue (the default follows JobRequeue)."""
        self.spec.requeue = 1 if allowed else 0
        return self

    def held(self) -> JobBuilder:
        self.spec.hold = True
        return self

    def exclusive(self) -> JobBuilder:
        """--exclusive: whole nodes."""
        self.spec.exclusive = True
        return self

    def name(self, text: str) -> JobBuilder:
        self.spec.name = text
        return self

    def signal(self, num: int, secs: int, batch_only: bool = False) -> JobBuilder:
        self.spec.signal_num, self.spec.signal_secs, self.spec.signal_batch_only = num, secs, batch_only
        return self

    def gpus(self, spec: str) -> JobBuilder:
        """--gres=gpu:N (or gpu:type:N)."""
        self.spec.gres = spec if spec.startswith("gpu") else f"gpu:{spec}"
        return self

    def interactive(self) -> JobBuilder:
        """An salloc/srun allocation: no script, no batch host launch."""
        self.spec.batch = False
        self.spec.script = b""
        return self


def job() -> JobBuilder:
    return JobBuilder()


# ---------------------------------------------------------------- the harness


@dataclass
class Harness:
    ctl: Controller
    nodes: RecordingNodes
    clock: Clock
    state_dir: Path
    silent: set[str] = field(default_factory=set)  # nodes that stopped answering (frozen, cut off, crashed)
    gpu_load: dict[str, dict[int, int]] = field(
        default_factory=dict
    )  # node -> GPU -> utilization its pings say

    @classmethod
    def of(cls, builder: ClusterBuilder, state_dir: Path, register: bool = True) -> Harness:
        cfg = parse_slurm_conf(builder.text(state_dir))
        recorder, clock = RecordingNodes(), Clock()
        h = cls(
            Controller(cfg, StateStore(state_dir), b"k" * 32, recorder, clock=clock),
            recorder,
            clock,
            state_dir,
        )
        if register:
            for name in builder.names:
                h.register(name)
        return h

    def restart(self) -> Harness:
        """A new controller over the same state store (ctld killed and started again)."""
        self.ctl.store.close()
        ctl = Controller(self.ctl.cfg, StateStore(self.state_dir), b"k" * 32, self.nodes, clock=self.clock)
        return Harness(ctl, self.nodes, self.clock, self.state_dir, self.silent)

    # --- what users and nodes do
    def submit(self, builder: JobBuilder, caller: Caller = ROOT) -> int:
        return self.ctl.submit(builder.spec, caller, test_only=False).job_id

    def register(
        self, name: str, running: tuple[int, ...] = (), finished: tuple[int, ...] = (), boot_time: int = 1
    ) -> controller_pb2.RegisterNodeResponse:
        conf = next(n for n in self.ctl.cfg.nodes if n.name == name)
        hardware = cluster_pb2.NodeHardware(
            cpus=conf.cpus, real_memory_mb=conf.real_memory, boot_time=boot_time
        )
        return self.ctl.register_node(
            controller_pb2.RegisterNodeRequest(
                name=name,
                hardware=hardware,
                running_jobs=list(running),
                finished_jobs=list(finished),
                reports_finished=True,
                version="test",
            )
        )

    def finish(self, job_id: int, exit_code: int = 0, exit_signal: int = 0) -> None:
        """The batch host reports the script's end, as noded does for its current run."""
        info = self.ctl.jobs[job_id]
        self.nodes.running.get(info.batch_host, set()).discard(job_id)
        self.ctl.complete_batch(
            controller_pb2.CompleteBatchRequest(
                node=info.batch_host,
                job_id=job_id,
                exit_code=exit_code,
                exit_signal=exit_signal,
                run=info.restarts,
                end_time=int(self.clock()),
            )
        )

    def cancel(
        self, job_id: int, caller: Caller = ROOT, signal: int = 0
    ) -> controller_pb2.SignalJobsResponse:
        return self.ctl.signal_jobs(
            controller_pb2.SignalJobsRequest(job_ids=[str(job_id)], signal=signal), caller
        )

    def update(self, job_id: int | str, action: str, caller: Caller = ROOT, **fields: str) -> list[str]:
        """scontrol hold/release/requeue/update of a job id as typed ("30", "30_2"); the per-job error
        messages ([] when all went well)."""
        req = controller_pb2.UpdateJobRequest(
            job_ids=[str(job_id)],
            action=action,
            fields=[common_pb2.KeyValue(key=k, value=v) for k, v in fields.items()],
        )
        return [r.message for r in self.ctl.update_job(req, caller).results if r.code]

    def schedule(self) -> int:
        return self.ctl.schedule()

    def tick(self) -> None:
        """One pass of ctld's housekeeping thread: nodes are pinged (the silent ones do not answer), then
        time limits, --signal warnings, node timeouts and the purge of old jobs."""
        self.ctl.ping_nodes()
        pinged, self.nodes.unanswered = self.nodes.unanswered, []
        for name, on_answer in pinged:
            answers = name not in self.silent
            running = sorted(self.nodes.running.get(name, ())) if answers else None
            reply = node_pb2.NodePingResponse(running_jobs=running or []) if answers else None
            if reply is not None:
                for index, util in sorted(self.gpu_load.get(name, {}).items()):
                    reply.gpus.add(index=index, utilization=util, memory_used_mb=100, memory_total_mb=81559)
            on_answer(name, answers, running, reply)
        self.ctl.housekeeping()

    def silence(self, name: str) -> None:
        """The node stops answering pings (SIGSTOP of noded, a cut cable)."""
        self.silent.add(name)

    def answer(self, name: str) -> None:
        """The node answers pings again (SIGCONT)."""
        self.silent.discard(name)

    def node_killed(self, name: str, job_id: int) -> None:
        """What a node still ran of a job is gone (its Terminate was carried out)."""
        self.nodes.running.get(name, set()).discard(job_id)

    def prolog_ends(self, name: str, job_id: int, error: str = "", unreachable: bool = False) -> None:
        """The node answers ctld's RunProlog: its Prolog succeeded, or failed with `error`."""
        self.nodes.prologs.pop((name, job_id))(error, unreachable)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    # --- what a user or admin would see
    def state(self, job_id: int) -> str:
        info = self.ctl.jobs.get(job_id)
        return "PURGED" if info is None else states.job_state_name(info.state)

    def reason(self, job_id: int) -> str:
        return self.ctl.jobs[job_id].state_reason

    def node_state(self, name: str) -> str:
        rows = self.ctl.get_nodes(controller_pb2.GetNodesRequest(names=[name])).nodes
        return rows[0].state

    def effects(self) -> list[Effect]:
        """What ctld asked of nodes since the last call (and forget it)."""
        taken, self.nodes.effects[:] = list(self.nodes.effects), []
        return taken
