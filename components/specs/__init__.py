"""Stack-config specs shared by the config and the per-workload modules."""
