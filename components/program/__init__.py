"""What ``pulumi up`` runs: the stack config as the engine hands it (``runtime``), the platform in
dependency order (``build``), and the private Pulumi SDK symbols it relies on (``pulumi_internals``).
Imports ``platform``, ``config``, ``planner`` and ``workloads``; never ``tools``."""
