"""`shoal sim`: replay workload traces through the real scheduler core under a virtual clock."""
