"""The deployer's IAM: the permissions ``pulumi up`` / ``pulumi destroy`` of a stack needs, derived
from the resource types (and a few inputs) the stack registers, and the smallest set of predefined
roles that grants them (``python -m components roles STACK``).

Pure functions (no ``pulumi`` import). :func:`deployer_roles` takes a stack's registrations (the
``resources`` of ``plan --json``), unions the permissions of their rows
(``components.tools.deployer_rows.ROWS``, one per resource type, each with its source), and computes
the cover from ``components.tools.predefined_roles.ROLES``, the vendored permissions of each
candidate predefined role.
"""

from __future__ import annotations

import itertools
import json
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import deployer_rows as rows
from .deployer_rows import ACT_AS, MissingRowError, RolesError
from .predefined_roles import ROLES, ROLES_SOURCE, Role

# --- A stack's deployer -----------------------------------------------------------------------

def scope(permission: str) -> str:
    """Where the permission is checked, so where the grant must sit:

    * ``project``: on the project itself (its IAM policy, reading it) or on the project as the
      parent of what is created in it (``*.create`` of Google Cloud resources, operations);
    * ``clusters``: Kubernetes API access, which GKE grants through IAM only on the project (the
      GKE roles' "lowest-level resources where you can grant this role: Project"), so in every
      cluster of the project;
    * ``resources``: on resources the stack creates; grantable on each resource once it exists,
      but not before the first ``up``, so in practice on the project as well.
    """
    service, _, rest = permission.partition(".")
    resource, _, verb = rest.rpartition(".")
    if service == "resourcemanager" or resource.endswith("perations"):
        return "project"
    if service == "container" and resource != "clusters":
        return "clusters"
    if verb == "create":
        return "project"
    return "resources"


SCOPES = ("project", "clusters", "resources")


@dataclass(frozen=True)
class DeployerRoles:
    stack: str
    environment: str
    project: str
    types: Mapping[str, Mapping[str, str]]
    """Registered resource type -> permission -> why (the union over its instances)."""
    roles: tuple[Role, ...]

    @property
    def permissions(self) -> tuple[str, ...]:
        return tuple(sorted({p for needs in self.types.values() for p in needs}))

    def by_scope(self) -> dict[str, tuple[str, ...]]:
        return {s: tuple(p for p in self.permissions if scope(p) == s) for s in SCOPES}

    def notes(self) -> list[str]:
        permissions = set(self.permissions)
        notes = [
            f"every role is granted on project {self.project}, so this identity can change every stack's resources in "
            "it, not only this stack's: prod's deployer must be a different identity, holding roles only in prod's own "
            "project, and non-prod deployers none there."
        ]
        if "resourcemanager.projects.setIamPolicy" in permissions:
            notes.append(
                "resourcemanager.projects.setIamPolicy lets the deployer grant any role in the project, itself "
                "included: it is as strong as the project's owner."
            )
        if ACT_AS in permissions:
            notes.append(
                f"{ACT_AS} granted on the project lets the deployer act as every service account in it, the Compute "
                "Engine default account included (the cluster's short-lived default pool runs as it)."
            )
        if any(scope(p) == "clusters" for p in permissions):
            notes.append(
                "Kubernetes objects: GKE authorizes the deployer through IAM (container.* permissions), so it needs no "
                "RBAC binding in the cluster; with roles/container.admin it can do anything in every cluster of the "
                "project (cluster-admin equivalent)."
            )
        notes.append(
            "state: the Pulumi state backend (PULUMI_BACKEND_URL) is outside this list; on a gs:// backend grant "
            "roles/storage.objectUser on the state bucket only, one bucket (or prefix) per environment."
        )
        return notes

    def to_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "environment": self.environment,
            "project": self.project,
            "roles": [
                {
                    "role": role.name,
                    "title": role.title,
                    "permissions_in_role": role.total,
                    "covers": sorted(role.permissions & set(self.permissions)),
                }
                for role in self.roles
            ],
            "permissions": list(self.permissions),
            "scope": {s: list(ps) for s, ps in self.by_scope().items()},
            "types": {t: dict(sorted(needs.items())) for t, needs in sorted(self.types.items())},
            "notes": self.notes(),
            "sources": {"roles": ROLES_SOURCE, "rows": "components/tools/deployer_rows.py ROWS (one source per row)"},
        }


def cover(permissions: Iterable[str], roles: Mapping[str, Role] | None = None) -> tuple[Role, ...]:
    """The fewest predefined roles that together hold every permission; among equally few, the
    ones granting the fewest permissions in total (then by name, so the answer is stable)."""
    candidates = ROLES if roles is None else roles
    needed = set(permissions)
    held = set().union(*(role.permissions for role in candidates.values())) if candidates else set()
    orphans = sorted(needed - held)
    if orphans:
        raise RolesError(
            f"no vendored role holds {', '.join(orphans)}: add the predefined role that does to ROLES in "
            f"components/tools/predefined_roles.py ({ROLES_SOURCE})"
        )
    useful = sorted((r for r in candidates.values() if r.permissions & needed), key=lambda r: (r.total, r.name))
    for size in range(len(useful) + 1):
        best: tuple[Role, ...] | None = None
        for combo in itertools.combinations(useful, size):
            if needed <= set().union(*(r.permissions for r in combo)):
                key = (sum(r.total for r in combo), tuple(r.name for r in combo))
                if best is None or key < (sum(r.total for r in best), tuple(r.name for r in best)):
                    best = combo
        if best is not None:
            return tuple(sorted(best, key=lambda r: r.name))
    raise AssertionError("unreachable: every needed permission is held by some candidate")


def deployer_roles(stack: str, environment: str, project: str, resources: Iterable[Mapping[str, Any]]) -> DeployerRoles:
    """The deployer's permissions and roles for one stack's registrations (raises :class:`MissingRowError`
    naming every registered type without a row)."""
    resources = rows.registered(resources)
    missing = {r["type"] for r in resources if r["type"] not in rows.ROWS}
    if missing:
        raise MissingRowError(missing)
    types: dict[str, dict[str, str]] = {}
    for resource in resources:
        needs = types.setdefault(resource["type"], {})
        for permission, why in rows.permissions_of(resource).items():
            needs.setdefault(permission, why)
    union = {p for needs in types.values() for p in needs}
    return DeployerRoles(stack, environment, project, types, cover(union))


def custom_role_yaml(result: DeployerRoles) -> str:
    """A custom role with exactly the stack's permissions, for ``gcloud iam roles create ROLE_ID
    --project=PROJECT --file=FILE`` (fields: title, description, stage, includedPermissions;
    cloud.google.com/iam/docs/creating-custom-roles)."""
    lines = [
        f"title: {json.dumps(f'Deployer of {result.stack}')}",
        "description: "
        + json.dumps(
            f"pulumi up/destroy of stack {result.stack} ({result.environment}); generated by "
            "`python -m components roles --format custom-role`"
        ),
        "stage: GA",
        "includedPermissions:",
        *(f"- {permission}" for permission in result.permissions),
    ]
    return "\n".join(lines) + "\n"


def render(result: DeployerRoles) -> str:
    """The human-readable report of ``roles STACK``."""
    permissions = set(result.permissions)
    out = [f"Deployer of {result.stack} ({result.environment}), project {result.project}", ""]
    out.append("Predefined roles (the fewest covering every permission below; grant them on the project):")
    width = max(len(role.name) for role in result.roles) if result.roles else 0
    for role in result.roles:
        covers = len(role.permissions & permissions)
        out.append(f"  {role.name:<{width}}  {role.title}: {covers} of the {len(permissions)} permissions (grants {role.total})")
    out.append("")
    out.append(f"Permissions ({len(permissions)}), by resource type:")
    for type_, needs in sorted(result.types.items()):
        note = rows.ROWS[type_].note if type_ in rows.ROWS else ""
        out.append(f"  {type_}" + (f" ({note})" if note else ""))
        out.extend(textwrap.wrap(", ".join(sorted(needs)), 120, initial_indent="    ", subsequent_indent="    "))
    out.append("")
    out.append("Scope (where each permission is checked):")
    scopes = result.by_scope()
    if scopes["project"]:
        out.append("  project-level, on the project itself or as the parent of what is created in it:")
        out.extend(textwrap.wrap(", ".join(scopes["project"]), 120, initial_indent="    ", subsequent_indent="    "))
    if scopes["clusters"]:
        out.append(
            f"  Kubernetes API: the {len(scopes['clusters'])} container.* permissions on Kubernetes objects above, "
            "granted through IAM on the project, so in every cluster of it"
        )
    if scopes["resources"]:
        out.append("  the stack's own resources (grantable on each once it exists, so on the project for the first up):")
        out.extend(textwrap.wrap(", ".join(scopes["resources"]), 120, initial_indent="    ", subsequent_indent="    "))
    out.append("")
    out.extend(f"note: {note}" for note in result.notes())
    out.append(f"sources: roles {ROLES_SOURCE}; each type's row in components/tools/deployer_rows.py")
    return "\n".join(out) + "\n"
