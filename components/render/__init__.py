"""Pure functions that return Kubernetes objects as plain dicts (no Pulumi, no YAML text).

Values may be Pulumi Outputs where an object embeds a value known only after apply (for example a
Google service-account email); everything else is plain data, so these functions are tested and
golden-checked without an engine.
"""

from .core import (
    common_labels,
    render_namespace,
    render_service_account,
)

__all__ = ["common_labels", "render_namespace", "render_service_account"]
