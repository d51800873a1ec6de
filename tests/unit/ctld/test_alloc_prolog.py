"""PrologFlags in the controller (no daemons): with Alloc the Prolog runs on every allocated node when
the job starts, the batch script waits for all of them, and a failure drains the node and requeues
the job held; without it the script is launched at once (each node runs its Prolog at its first step)."""

from __future__ import annotations

from pathlib import Path

from ctld.accounting import extern_step_record
from shoal.v1 import controller_pb2
from tests.unit.ctld.harness import Harness, Launch, RunProlog, Terminate, cluster, job


def _h(tmp_path: Path, flags: str = "Alloc") -> Harness:
    return Harness.of(cluster().nodes(3, cpus=4).set(PrologFlags=flags, Prolog="/etc/slurm/prolog"), tmp_path)


def _node(h: Harness, name: str) -> controller_pb2.NodeInfo:
    return h.ctl.get_nodes(controller_pb2.GetNodesRequest(names=[name])).nodes[0]


def test_without_alloc_the_batch_script_is_launched_at_once(tmp_path: Path) -> None:
    h = Harness.of(cluster().nodes(2, cpus=4).set(Prolog="/etc/slurm/prolog"), tmp_path)
    job_id = h.submit(job().nodes(2))
    assert h.schedule() == 1
    assert h.effects() == [Launch("n1", job_id)]  # no RunProlog: noded runs it at the first step
    assert h.reason(job_id) == "None"


def test_alloc_runs_the_prolog_on_every_node_before_the_batch_script(tmp_path: Path) -> None:
    h = _h(tmp_path)
    job_id = h.submit(job().nodes(2))
    assert h.schedule() == 1
    assert h.effects() == [RunProlog("n1", job_id), RunProlog("n2", job_id)]
    assert (h.state(job_id), h.reason(job_id)) == ("RUNNING", "Prolog")  # 22.05: RUNNING, Reason=Prolog
    h.prolog_ends("n2", job_id)
    assert h.effects() == []  # the script waits for every node
    h.prolog_ends("n1", job_id)
    assert h.effects() == [Launch("n1", job_id)]
    assert (h.state(job_id), h.reason(job_id)) == ("RUNNING", "None")
    assert not h.ctl.jobs[job_id].prolog_pending


def test_an_interactive_allocation_waits_with_reason_prolog_and_launches_nothing(tmp_path: Path) -> None:
    h = _h(tmp_path, "NoHold")
    job_id = h.submit(job().interactive())
    h.schedule()
    assert h.effects() == [RunProlog("n1", job_id)]
    info = h.ctl.jobs[job_id]
    assert (list(info.prolog_pending), info.prolog_nohold) == (["n1"], True)  # salloc need not wait
    h.prolog_ends("n1", job_id)
    assert h.effects() == [] and h.reason(job_id) == "None"


def test_a_failed_prolog_at_allocation_drains_the_node_and_requeues_the_job_held(tmp_path: Path) -> None:
    h = _h(tmp_path)
    job_id = h.submit(job().nodes(2))
    h.schedule()
    h.effects()
    h.prolog_ends("n1", job_id)
    h.prolog_ends("n2", job_id, "Job prolog failed (prolog /etc/slurm/prolog failed (exit code 1))")
    info = h.ctl.jobs[job_id]
    assert (h.state(job_id), h.reason(job_id), info.priority, info.restarts) == (
        "PENDING",
        "launch failed requeued held",
        0,
        1,
    )
    node = _node(h, "n2")
    assert (node.state, node.reason) == ("IDLE+DRAIN", "Prolog error")
    assert "DRAIN" not in _node(h, "n1").state
    # no script was launched; what the Prolog started ends on both nodes (their Epilogs run)
    assert sorted(h.effects(), key=str) == [
        Terminate("n1", job_id, "ended"),
        Terminate("n2", job_id, "ended"),
    ]


def test_a_failed_prolog_ends_an_interactive_allocation(tmp_path: Path) -> None:
    h = _h(tmp_path)
    job_id = h.submit(job().interactive())
    h.schedule()
    h.effects()
    h.prolog_ends("n1", job_id, "Job prolog failed (prolog /etc/slurm/prolog failed (exit code 1))")
    assert h.state(job_id) == "FAILED"
    assert "DRAIN" in _node(h, "n1").state


def test_a_late_answer_for_a_cancelled_job_changes_nothing(tmp_path: Path) -> None:
    h = _h(tmp_path)
    job_id = h.submit(job())
    h.schedule()
    h.cancel(job_id)
    h.effects()
    h.prolog_ends("n1", job_id, "Job prolog failed (killed after 5 s)")
    assert h.state(job_id) == "CANCELLED"
    assert h.effects() == [] and "DRAIN" not in _node(h, "n1").state


def test_a_restarted_controller_asks_again_for_the_prologs_it_waited_for(tmp_path: Path) -> None:
    h = _h(tmp_path)
    job_id = h.submit(job().nodes(2))
    h.schedule()
    h.prolog_ends("n1", job_id)
    h.effects()
    h = h.restart()
    assert h.effects() == [RunProlog("n2", job_id)]
    h.prolog_ends("n2", job_id)
    assert h.effects() == [Launch("n1", job_id)]


def test_contain_gives_the_job_an_extern_step(tmp_path: Path) -> None:
    h = _h(tmp_path, "Contain")
    job_id = h.submit(job().nodes(2))
    h.schedule()
    assert h.effects() == [RunProlog("n1", job_id, contain=True), RunProlog("n2", job_id, contain=True)]
    info = h.ctl.jobs[job_id]
    running = extern_step_record(info)
    assert (running.name, running.state, running.nodelist, running.num_tasks) == (
        "extern",
        "RUNNING",
        "n[1-2]",
        2,
    )
    h.cancel(job_id)
    ended = extern_step_record(h.ctl.jobs[job_id])
    # 22.05: a cancelled job's extern step is COMPLETED 0:0, from the job's start to its end
    assert (ended.state, ended.exit_code, ended.exit_signal) == ("COMPLETED", 0, 0)
    assert (ended.start_time, ended.end_time) == (info.start_time, h.ctl.jobs[job_id].end_time)


def test_show_config_lists_prolog_flags_as_22_05(tmp_path: Path) -> None:
    for flags, shown in (("contain", "Alloc,Contain"), ("Serial,NoHold", "Alloc,NoHold,Serial")):
        h = _h(tmp_path / flags, flags)
        entries = {e.key: e.value for e in h.ctl.get_config().entries}
        assert entries["PrologFlags"] == shown
