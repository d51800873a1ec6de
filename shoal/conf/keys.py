"""The key names slurm.conf and gres.conf accept, in Slurm's spelling (keys match case-insensitively).

A key known here is accepted even when shoal does not act on it yet, so a site's existing
slurm.conf loads; a key not known here is reported as a warning and ignored.
"""

from __future__ import annotations

# Top-level slurm.conf keys (Slurm 22.05), plus shoal's own (AuthKeyFile, AgentSocket, Shoal*) and old
# spellings that Slurm still reads (ControlMachine, ControlAddr, BackupController, BackupAddr).
SLURM_KEYS: tuple[str, ...] = (
    "AccountingStorageBackupHost", "AccountingStorageEnforce", "AccountingStorageExternalHost",
    "AccountingStorageHost", "AccountingStorageLoc", "AccountingStorageParameters",
    "AccountingStoragePass", "AccountingStoragePort", "AccountingStorageTRES",
    "AccountingStorageType", "AccountingStorageUser", "AccountingStoreFlags",
    "AccountingStoreJobComment", "AcctGatherEnergyType", "AcctGatherFilesystemType",
    "AcctGatherInterconnectType", "AcctGatherNodeFreq", "AcctGatherProfileType",
    "AgentSocket", "AllowSpecResourcesUsage", "AuthAltParameters", "AuthAltTypes", "AuthInfo",
    "AuthKeyFile", "AuthType", "BackupAddr", "BackupController", "BatchStartTimeout",
    "BcastExclude", "BcastParameters", "BurstBufferType", "CacheGroups", "CheckpointType",
    "CliFilterPlugins", "ClusterName", "CommunicationParameters", "CompleteWait", "ControlAddr",
    "ControlMachine", "CoreSpecPlugin", "CpuFreqDef", "CpuFreqGovernors", "CredType",
    "CryptoType", "DebugFlags", "DefCpuPerGPU", "DefMemPerCPU", "DefMemPerGPU", "DefMemPerNode",
    "DependencyParameters", "DisableRootJobs", "EioTimeout", "EnforcePartLimits", "Epilog",
    "EpilogMsgTime", "EpilogSlurmctld", "ExtSensorsFreq", "ExtSensorsType",
    "FairShareDampeningFactor", "FastSchedule", "FederationParameters", "FirstJobId",
    "GetEnvTimeout", "GpuFreqDef", "GresTypes", "GroupUpdateForce", "GroupUpdateTime",
    "HashPlugin", "HealthCheckInterval", "HealthCheckNodeState", "HealthCheckProgram",
    "InactiveLimit", "InteractiveStepOptions", "JobAcctGatherFrequency", "JobAcctGatherParams",
    "JobAcctGatherType", "JobCompHost", "JobCompLoc", "JobCompParams", "JobCompPass",
    "JobCompPort", "JobCompType", "JobCompUser", "JobContainerType", "JobCredentialPrivateKey",
    "JobCredentialPublicCertificate", "JobFileAppend", "JobRequeue", "JobSubmitPlugins",
    "KeepAliveTime", "KillOnBadExit", "KillWait", "LaunchParameters", "LaunchType", "Licenses",
    "LogTimeFormat", "MailDomain", "MailProg", "MaxArraySize", "MaxBatchRequeue", "MaxDBDMsgs",
    "MaxJobCount", "MaxJobId", "MaxMemPerCPU", "MaxMemPerNode", "MaxNodeCount", "MaxStepCount",
    "MaxTasksPerNode", "MCSParameters", "MCSPlugin", "MessageTimeout", "MetricsAuthUsers",
    "MetricsParameters", "MetricsType", "MinJobAge", "MpiDefault",
    "MpiParams", "NodeFeaturesPlugins", "OverTimeLimit", "PluginDir", "PlugStackConfig",
    "PowerParameters", "PowerPlugin", "PreemptExemptTime", "PreemptMode", "PreemptParameters",
    "PreemptType", "PrEpParameters", "PrEpPlugins", "PriorityCalcPeriod", "PriorityDecayHalfLife",
    "PriorityFavorSmall", "PriorityFlags", "PriorityMaxAge", "PriorityParameters",
    "PrioritySiteFactorParameters", "PrioritySiteFactorPlugin", "PriorityType",
    "PriorityUsageResetPeriod", "PriorityWeightAge", "PriorityWeightAssoc",
    "PriorityWeightFairshare", "PriorityWeightJobSize", "PriorityWeightPartition",
    "PriorityWeightQOS", "PriorityWeightTRES", "PrivateData", "ProctrackType", "Prolog",
    "PrologEpilogTimeout", "PrologFlags", "PrologSlurmctld", "PropagatePrioProcess",
    "PropagateResourceLimits", "PropagateResourceLimitsExcept", "RebootProgram", "ReconfigFlags",
    "RequeueExit", "RequeueExitHold", "ResumeFailProgram", "ResumeProgram", "ResumeRate",
    "ResumeTimeout", "ResvEpilog", "ResvOverRun", "ResvProlog", "ReturnToService", "RoutePlugin",
    "SallocDefaultCommand", "SbcastSupport", "SchedulerParameters", "SchedulerTimeSlice",
    "SchedulerType", "ScronParameters", "SelectType", "SelectTypeParameters", "ShoalLeaseTimeout",
    "ShoalStateStore", "ShoalStateStorePassFile", "SlurmctldAddr",
    "SlurmctldDebug", "SlurmctldHost", "SlurmctldLogFile", "SlurmctldParameters",
    "SlurmctldPidFile", "SlurmctldPlugstack", "SlurmctldPort", "SlurmctldPrimaryOffProg",
    "SlurmctldPrimaryOnProg", "SlurmctldSyslogDebug", "SlurmctldTimeout", "SlurmdDebug",
    "SlurmdLogFile", "SlurmdParameters", "SlurmdPidFile", "SlurmdPort", "SlurmdSpoolDir",
    "SlurmdSyslogDebug", "SlurmdTimeout", "SlurmdUser", "SlurmSchedLogFile",
    "SlurmSchedLogLevel", "SlurmUser", "SrunEpilog", "SrunPortRange", "SrunProlog",
    "StateSaveLocation", "SuspendExcNodes", "SuspendExcParts", "SuspendProgram", "SuspendRate",
    "SuspendTime", "SuspendTimeout", "SwitchParameters", "SwitchType", "TaskEpilog",
    "TaskPlugin", "TaskPluginParam", "TaskProlog", "TCPTimeout", "TmpFS", "TopologyParam",
    "TopologyPlugin", "TrackWCKey", "TreeWidth", "UnkillableStepProgram",
    "UnkillableStepTimeout", "UsePAM", "VSizeFactor", "WaitTime", "X11Parameters",
)  # fmt: skip

# Keys of a NodeName= line.
NODE_KEYS: tuple[str, ...] = (
    "NodeName", "BcastAddr", "Boards", "CoreSpecCount", "CoresPerSocket", "CpuBind", "CPUs",
    "CPUSpecList", "Feature", "Features", "Gres", "MemSpecLimit", "NodeAddr", "NodeHostname",
    "Port", "Procs", "RealMemory", "Reason", "Sockets", "SocketsPerBoard", "State",
    "ThreadsPerCore", "TmpDisk", "TRESWeights", "Weight",
)  # fmt: skip

# Keys of a PartitionName= line ("Shared" and "Priority" are the old spellings).
PARTITION_KEYS: tuple[str, ...] = (
    "PartitionName", "AllocNodes", "AllowAccounts", "AllowGroups", "AllowQos", "Alternate",
    "CpuBind", "Default", "DefaultTime", "DefCpuPerGPU", "DefMemPerCPU", "DefMemPerGPU",
    "DefMemPerNode", "DenyAccounts", "DenyQos", "DisableRootJobs", "ExclusiveUser", "GraceTime",
    "Hidden", "LLN", "MaxCPUsPerNode", "MaxMemPerCPU", "MaxMemPerNode", "MaxNodes", "MaxTime",
    "MinNodes", "Nodes", "OverSubscribe", "OverTimeLimit", "PowerDownOnIdle", "PreemptMode",
    "Priority", "PriorityJobFactor", "PriorityTier", "QOS", "ReqResv", "ResumeTimeout",
    "RootOnly", "SelectTypeParameters", "Shared", "State", "SuspendTime", "SuspendTimeout",
    "TRESBillingWeights",
)  # fmt: skip

NODESET_KEYS: tuple[str, ...] = ("NodeSet", "Feature", "Nodes")
DOWNNODES_KEYS: tuple[str, ...] = ("DownNodes", "Reason", "State")
FRONTEND_KEYS: tuple[str, ...] = (
    "FrontendName", "FrontendAddr", "AllowGroups", "AllowUsers", "DenyGroups", "DenyUsers",
    "Port", "Reason", "State",
)  # fmt: skip

# Keys of a gres.conf line (Slurm 22.05; "CPUs" is the old spelling of Cores).
GRES_KEYS: tuple[str, ...] = (
    "AutoDetect", "Count", "Cores", "CPUs", "File", "Flags", "Links", "MultipleFiles", "Name",
    "NodeName", "Type",
)  # fmt: skip


def canonical(keys: tuple[str, ...]) -> dict[str, str]:
    """Lower-case spelling -> Slurm's spelling, for case-insensitive lookups."""
    return {key.lower(): key for key in keys}
