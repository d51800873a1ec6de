"""`scontrol show config`: every key Slurm 22.05 prints, in its order, with shoal's values.

A key slurm.conf sets shows what it says (in 22.05's form: "30 sec", "7-00:00:00"); a key shoal uses but
the file leaves out shows the value shoal runs with; any other key shows Slurm's documented default (the
value the real 22.05 printed for a slurm.conf without it), never a value of our own making.
"""

from __future__ import annotations

import pwd
from collections.abc import Mapping

from shoal import SLURM_VERSION
from shoal.conf import SlurmConfig
from shoal.conf.slurm import PROLOG_FLAG_NAMES, preempt_mode_text
from shoal.timefmt import format_hms, format_time_limit, format_timestamp, parse_time_limit

# (key, Slurm's default, unit 22.05 appends), in the order 22.05 prints them
KEYS: tuple[tuple[str, str, str], ...] = (
    ("AccountingStorageBackupHost", "(null)", ""),
    ("AccountingStorageEnforce", "none", ""),
    ("AccountingStorageHost", "(null)", ""),
    ("AccountingStorageExternalHost", "(null)", ""),
    ("AccountingStorageParameters", "(null)", ""),
    ("AccountingStoragePort", "6819", ""),
    ("AccountingStorageTRES", "cpu,mem,energy,node,billing,fs/disk,vmem,pages", ""),
    ("AccountingStorageType", "accounting_storage/none", ""),
    ("AccountingStorageUser", "N/A", ""),
    ("AccountingStoreFlags", "(null)", ""),
    ("AcctGatherEnergyType", "acct_gather_energy/none", ""),
    ("AcctGatherFilesystemType", "acct_gather_filesystem/none", ""),
    ("AcctGatherInterconnectType", "acct_gather_interconnect/none", ""),
    ("AcctGatherNodeFreq", "0", "sec"),
    ("AcctGatherProfileType", "acct_gather_profile/none", ""),
    ("AllowSpecResourcesUsage", "No", ""),
    ("AuthAltTypes", "(null)", ""),
    ("AuthAltParameters", "(null)", ""),
    ("AuthInfo", "(null)", ""),
    ("AuthType", "auth/munge", ""),
    ("BatchStartTimeout", "10", "sec"),
    ("BcastExclude", "/lib,/usr/lib,/lib64,/usr/lib64", ""),
    ("BcastParameters", "(null)", ""),
    ("BOOT_TIME", "", ""),
    ("BurstBufferType", "(null)", ""),
    ("CliFilterPlugins", "(null)", ""),
    ("ClusterName", "(null)", ""),
    ("CommunicationParameters", "(null)", ""),
    ("CompleteWait", "0", "sec"),
    ("CoreSpecPlugin", "core_spec/none", ""),
    ("CpuFreqDef", "Unknown", ""),
    ("CpuFreqGovernors", "OnDemand,Performance,UserSpace", ""),
    ("CredType", "cred/munge", ""),
    ("DebugFlags", "(null)", ""),
    ("DefMemPerCPU", "UNLIMITED", ""),
    ("DependencyParameters", "(null)", ""),
    ("DisableRootJobs", "No", ""),
    ("EioTimeout", "60", ""),
    ("EnforcePartLimits", "NO", ""),
    ("Epilog", "(null)", ""),
    ("EpilogMsgTime", "2000", "usec"),
    ("EpilogSlurmctld", "(null)", ""),
    ("ExtSensorsType", "ext_sensors/none", ""),
    ("ExtSensorsFreq", "0", "sec"),
    ("FairShareDampeningFactor", "1", ""),
    ("FederationParameters", "(null)", ""),
    ("FirstJobId", "1", ""),
    ("GetEnvTimeout", "2", "sec"),
    ("GresTypes", "(null)", ""),
    ("GpuFreqDef", "high,memory=high", ""),
    ("GroupUpdateForce", "1", ""),
    ("GroupUpdateTime", "600", "sec"),
    ("HASH_VAL", "Match", ""),
    ("HealthCheckInterval", "0", "sec"),
    ("HealthCheckNodeState", "ANY", ""),
    ("HealthCheckProgram", "(null)", ""),
    ("InactiveLimit", "0", "sec"),
    ("InteractiveStepOptions", "--interactive --preserve-env --pty $SHELL", ""),
    ("JobAcctGatherFrequency", "30", ""),
    ("JobAcctGatherType", "jobacct_gather/none", ""),
    ("JobAcctGatherParams", "(null)", ""),
    ("JobCompHost", "localhost", ""),
    ("JobCompLoc", "/var/log/slurm_jobcomp.log", ""),
    ("JobCompPort", "0", ""),
    ("JobCompType", "jobcomp/none", ""),
    ("JobCompUser", "root", ""),
    ("JobContainerType", "job_container/none", ""),
    ("JobCredentialPrivateKey", "(null)", ""),
    ("JobCredentialPublicCertificate", "(null)", ""),
    ("JobDefaults", "(null)", ""),
    ("JobFileAppend", "0", ""),
    ("JobRequeue", "1", ""),
    ("JobSubmitPlugins", "(null)", ""),
    ("KillOnBadExit", "0", ""),
    ("KillWait", "30", "sec"),
    ("LaunchParameters", "(null)", ""),
    ("LaunchType", "launch/slurm", ""),
    ("Licenses", "(null)", ""),
    ("LogTimeFormat", "iso8601_ms", ""),
    ("MailDomain", "(null)", ""),
    ("MailProg", "/bin/mail", ""),
    ("MaxArraySize", "1001", ""),
    ("MaxDBDMsgs", "20016", ""),
    ("MaxJobCount", "10000", ""),
    ("MaxJobId", "67043328", ""),
    ("MaxMemPerNode", "UNLIMITED", ""),
    ("MaxNodeCount", "0", ""),
    ("MaxStepCount", "40000", ""),
    ("MaxTasksPerNode", "512", ""),
    ("MCSPlugin", "mcs/none", ""),
    ("MCSParameters", "(null)", ""),
    ("MessageTimeout", "10", "sec"),
    ("MinJobAge", "300", "sec"),
    ("MpiDefault", "none", ""),
    ("MpiParams", "(null)", ""),
    ("MULTIPLE_SLURMD", "Yes", ""),
    ("NEXT_JOB_ID", "1", ""),
    ("NodeFeaturesPlugins", "(null)", ""),
    ("OverTimeLimit", "0", "min"),
    ("PluginDir", "/usr/local/lib/slurm", ""),
    ("PlugStackConfig", "(null)", ""),
    ("PowerParameters", "(null)", ""),
    ("PowerPlugin", "", ""),
    ("PreemptMode", "OFF", ""),
    ("PreemptType", "preempt/none", ""),
    ("PreemptExemptTime", "00:00:00", ""),
    ("PrEpParameters", "(null)", ""),
    ("PrEpPlugins", "prep/script", ""),
    ("PriorityParameters", "(null)", ""),
    ("PrioritySiteFactorParameters", "(null)", ""),
    ("PrioritySiteFactorPlugin", "(null)", ""),
    ("PriorityDecayHalfLife", "7-00:00:00", ""),
    ("PriorityCalcPeriod", "00:05:00", ""),
    ("PriorityFavorSmall", "No", ""),
    ("PriorityFlags", "", ""),
    ("PriorityMaxAge", "7-00:00:00", ""),
    ("PriorityUsageResetPeriod", "NONE", ""),
    ("PriorityType", "priority/basic", ""),
    ("PriorityWeightAge", "0", ""),
    ("PriorityWeightAssoc", "0", ""),
    ("PriorityWeightFairShare", "0", ""),
    ("PriorityWeightJobSize", "0", ""),
    ("PriorityWeightPartition", "0", ""),
    ("PriorityWeightQOS", "0", ""),
    ("PriorityWeightTRES", "(null)", ""),
    ("PrivateData", "none", ""),
    ("ProctrackType", "proctrack/linuxproc", ""),
    ("Prolog", "(null)", ""),
    ("PrologEpilogTimeout", "65534", ""),
    ("PrologSlurmctld", "(null)", ""),
    ("PrologFlags", "(null)", ""),
    ("PropagatePrioProcess", "0", ""),
    ("PropagateResourceLimits", "ALL", ""),
    ("PropagateResourceLimitsExcept", "(null)", ""),
    ("RebootProgram", "(null)", ""),
    ("ReconfigFlags", "(null)", ""),
    ("RequeueExit", "(null)", ""),
    ("RequeueExitHold", "(null)", ""),
    ("ResumeFailProgram", "(null)", ""),
    ("ResumeProgram", "(null)", ""),
    ("ResumeRate", "300", "nodes/min"),
    ("ResumeTimeout", "60", "sec"),
    ("ResvEpilog", "(null)", ""),
    ("ResvOverRun", "0", "min"),
    ("ResvProlog", "(null)", ""),
    ("ReturnToService", "0", ""),
    ("RoutePlugin", "route/default", ""),
    ("SchedulerParameters", "(null)", ""),
    ("SchedulerTimeSlice", "30", "sec"),
    ("SchedulerType", "sched/backfill", ""),
    ("ScronParameters", "(null)", ""),
    ("SelectType", "select/cons_tres", ""),
    ("SelectTypeParameters", "CR_CORE_MEMORY", ""),
    ("SlurmUser", "root(0)", ""),
    ("SlurmctldAddr", "(null)", ""),
    ("SlurmctldDebug", "info", ""),
    ("SlurmctldHost[0]", "", ""),
    ("SlurmctldLogFile", "(null)", ""),
    ("SlurmctldPort", "6817", ""),
    ("SlurmctldSyslogDebug", "(null)", ""),
    ("SlurmctldPrimaryOffProg", "(null)", ""),
    ("SlurmctldPrimaryOnProg", "(null)", ""),
    ("SlurmctldTimeout", "120", "sec"),
    ("SlurmctldParameters", "(null)", ""),
    ("SlurmdDebug", "info", ""),
    ("SlurmdLogFile", "(null)", ""),
    ("SlurmdParameters", "(null)", ""),
    ("SlurmdPidFile", "/var/run/slurmd.pid", ""),
    ("SlurmdPort", "6818", ""),
    ("SlurmdSpoolDir", "/var/spool/slurmd", ""),
    ("SlurmdSyslogDebug", "(null)", ""),
    ("SlurmdTimeout", "300", "sec"),
    ("SlurmdUser", "root(0)", ""),
    ("SlurmSchedLogFile", "(null)", ""),
    ("SlurmSchedLogLevel", "0", ""),
    ("SlurmctldPidFile", "/var/run/slurmctld.pid", ""),
    ("SlurmctldPlugstack", "(null)", ""),
    ("SLURM_CONF", "/etc/slurm/slurm.conf", ""),
    ("SLURM_VERSION", "22.05.8", ""),
    ("SrunEpilog", "(null)", ""),
    ("SrunPortRange", "0-0", ""),
    ("SrunProlog", "(null)", ""),
    ("StateSaveLocation", "/var/spool/slurmctld", ""),
    ("SuspendExcNodes", "(null)", ""),
    ("SuspendExcParts", "(null)", ""),
    ("SuspendProgram", "(null)", ""),
    ("SuspendRate", "60", "nodes/min"),
    ("SuspendTime", "INFINITE", ""),
    ("SuspendTimeout", "30", "sec"),
    ("SwitchParameters", "(null)", ""),
    ("SwitchType", "switch/none", ""),
    ("TaskEpilog", "(null)", ""),
    ("TaskPlugin", "task/none", ""),
    ("TaskPluginParam", "(null type)", ""),
    ("TaskProlog", "(null)", ""),
    ("TCPTimeout", "2", "sec"),
    ("TmpFS", "/tmp", ""),
    ("TopologyParam", "(null)", ""),
    ("TopologyPlugin", "topology/none", ""),
    ("TrackWCKey", "No", ""),
    ("TreeWidth", "50", ""),
    ("UsePam", "No", ""),
    ("UnkillableStepProgram", "(null)", ""),
    ("UnkillableStepTimeout", "60", "sec"),
    ("VSizeFactor", "0", "percent"),
    ("WaitTime", "0", "sec"),
    ("X11Parameters", "(null)", ""),
)
_DEFAULT_TRES = "cpu,mem,energy,node,billing,fs/disk,vmem,pages"
_DURATIONS = {"prioritydecayhalflife", "prioritymaxage"}  # written "7-0", shown d-hh:mm:ss


def tracked_tres(cfg: SlurmConfig) -> list[str]:
    """The TRES accounting tracks (AccountingStorageTRES), in Slurm's order: the eight it always has,
    then one gres/NAME per GresTypes entry; sshare's TRESRunMins lists every one."""
    return [*_DEFAULT_TRES.split(","), *(f"gres/{g}" for g in cfg.gres_types)]


def _user(name: str) -> str:
    try:
        return f"{name}({pwd.getpwnam(name).pw_uid})"
    except KeyError:
        return name


def _duration(text: str) -> str:
    try:
        return format_time_limit(parse_time_limit(text))
    except ValueError:
        return text


def _run_values(cfg: SlurmConfig, boot_time: int, next_job_id: int) -> dict[str, str]:
    """Values shoal runs with (its defaults are Slurm's), whether or not slurm.conf names the key."""
    accounting = cfg.accounting_storage_type == "accounting_storage/slurmdbd"
    tres = ",".join(tracked_tres(cfg))
    return {
        "AccountingStorageEnforce": ",".join(cfg.accounting_storage_enforce).lower() or "none",
        "AccountingStorageHost": (cfg.accounting_storage_host or cfg.control_machine)
        if accounting
        else "(null)",
        "AccountingStoragePort": str(cfg.accounting_storage_port if accounting else 0),
        "AccountingStorageTRES": tres,
        "AccountingStorageType": cfg.accounting_storage_type,
        "AuthType": cfg.auth_type,
        "BOOT_TIME": format_timestamp(boot_time),
        "ClusterName": cfg.cluster_name or "(null)",
        "EnforcePartLimits": cfg.enforce_part_limits,
        "FirstJobId": str(cfg.first_job_id),
        "GresTypes": ",".join(cfg.gres_types) or "(null)",
        "InactiveLimit": str(cfg.inactive_limit),
        "JobAcctGatherType": cfg.job_acct_gather_type,
        "KillWait": str(cfg.kill_wait),
        "MaxArraySize": str(cfg.max_array_size),
        "MaxDBDMsgs": str(max(10000, 2 * cfg.max_job_count + 4 * len(cfg.nodes))),
        "MaxJobCount": str(cfg.max_job_count),
        "MaxNodeCount": str(len(cfg.nodes)),
        "MessageTimeout": str(cfg.msg_timeout),
        "MinJobAge": str(cfg.min_job_age),
        "NEXT_JOB_ID": str(next_job_id),
        "PreemptMode": preempt_mode_text(cfg.preempt_mode, cfg.preempt_gang),
        "PreemptType": cfg.preempt_type,
        "PreemptExemptTime": format_hms(cfg.preempt_exempt_time),
        "PriorityCalcPeriod": format_time_limit(cfg.priority_calc_period),
        "PriorityType": cfg.priority_type,
        "PrologFlags": ",".join(f for f in PROLOG_FLAG_NAMES if f.upper() in cfg.prolog_flags) or "(null)",
        "ProctrackType": cfg.proctrack_type,
        "ReturnToService": str(cfg.return_to_service),
        "SchedulerParameters": ",".join(cfg.scheduler_parameters) or "(null)",
        "SchedulerType": cfg.scheduler_type,
        "SelectType": cfg.select_type,
        "SelectTypeParameters": ",".join(cfg.select_type_parameters).upper() or "CR_CORE_MEMORY",
        "SlurmUser": _user(cfg.slurm_user),
        "SlurmctldLogFile": cfg.slurmctld_log_file or "(null)",
        "SlurmctldPort": str(cfg.slurmctld_port),
        "SlurmctldTimeout": str(cfg.slurmctld_timeout),
        "SlurmdLogFile": cfg.slurmd_log_file or "(null)",
        "SlurmdParameters": ",".join(cfg.slurmd_parameters) or "(null)",
        "SlurmdPidFile": cfg.slurmd_pid_file,
        "SlurmdPort": str(cfg.slurmd_port),
        "SlurmdSpoolDir": cfg.slurmd_spool_dir,
        "SlurmdTimeout": str(cfg.slurmd_timeout),
        "SlurmdUser": _user(cfg.slurmd_user),
        "SlurmctldPidFile": cfg.slurmctld_pid_file,
        "SLURM_CONF": cfg.path,
        "SLURM_VERSION": SLURM_VERSION,
        "StateSaveLocation": cfg.state_save_location,
        "TaskPlugin": cfg.task_plugin,
        "TCPTimeout": str(cfg.tcp_timeout),
        "TopologyPlugin": cfg.topology_plugin,
    }


def _memory(cfg: SlurmConfig) -> tuple[str, str]:
    """22.05 prints DefMemPerCPU or DefMemPerNode (UNLIMITED when neither is set) in one place."""
    if cfg.def_mem_per_cpu:
        return "DefMemPerCPU", str(cfg.def_mem_per_cpu)
    return "DefMemPerNode", str(cfg.def_mem_per_node) if cfg.def_mem_per_node else "UNLIMITED"


def config_entries(cfg: SlurmConfig, boot_time: int, next_job_id: int) -> list[tuple[str, str]]:
    """(key, value) pairs as 22.05's `scontrol show config` lists them."""
    written: Mapping[str, str] = {key.lower(): value for key, value in cfg.entries}
    run = _run_values(cfg, boot_time, next_job_id)
    out: list[tuple[str, str]] = []
    for key, default, unit in KEYS:
        if key == "DefMemPerCPU":
            out.append(_memory(cfg))
            continue
        if key == "SlurmctldHost[0]":
            hosts = cfg.control_hosts or ((cfg.control_machine, cfg.control_addr),)
            out += [(f"SlurmctldHost[{i}]", f"{name}({addr})") for i, (name, addr) in enumerate(hosts)]
            continue
        lower = key.lower()
        if key in run:
            value = run[key]
        elif lower in written:
            value = _duration(written[lower]) if lower in _DURATIONS else written[lower]
        elif lower == "waittime" and "waittime" in written:
            value = written["waittime"]
        else:
            value = default
        if unit and value not in ("UNLIMITED", "INFINITE", "(null)"):
            value = f"{value} {unit}"
        out.append((key, value))
    return out
