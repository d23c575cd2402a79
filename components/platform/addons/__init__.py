"""Cluster-level features, one module each, that a stack or a workload kind opts into as a function
of its settings: Helm-installed controllers (``controllers``) and capacity scheduling
(``capacity_scheduling``: ComputeClass, Kueue)."""
