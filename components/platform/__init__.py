"""What a library user imports: the GKE cluster, TPU slice pools, buckets, Workload Identity, the
Kubernetes helpers and their typed Args (re-exported lazily by ``components``), plus ``addons``:
one module per cluster-level feature a stack or kind opts into."""
