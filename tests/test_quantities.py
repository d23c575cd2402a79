"""Every Kubernetes resource quantity a stack renders is a string.

The Kubernetes OpenAPI schema types a quantity (``resource.Quantity``: ``google.com/tpu``, cpu, memory,
an emptyDir's ``sizeLimit``, Kueue quotas, HPA targets) as a string, and pulumi-kubernetes' SDK follows
it; an integer happens to be accepted by the API server's decoder, but it diffs against the string
the server returns and breaks strict schema validation. One walker over every object of every stack,
so a new renderer cannot add an integer quantity unnoticed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import STACKS, planned

# Keys whose value is a map of resource name -> quantity.
QUANTITY_MAPS = frozenset({"requests", "limits", "capacity", "allocatable", "hard", "default", "defaultRequest"})
# Keys whose value is itself one quantity.
QUANTITY_VALUES = frozenset({"sizeLimit", "nominalQuota", "borrowingLimit", "lendingLimit", "averageValue", "value"})


def quantities(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of every quantity under ``node``: the values of a ``resources.requests``-style map,
    and the single-quantity keys (``value`` only inside an HPA metric ``target``)."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}"
            if key in QUANTITY_MAPS and path.endswith("resources") and isinstance(value, dict):
                yield from ((f"{here}.{name}", q) for name, q in value.items())
            elif key in QUANTITY_VALUES and not isinstance(value, (dict, list)):
                if key != "value" or path.endswith("target"):
                    yield here, value
            else:
                yield from quantities(value, here)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from quantities(item, f"{path}[{index}]")


@pytest.mark.parametrize("stack", STACKS)
def test_quantities_are_strings_in_every_rendered_object(stack: str) -> None:
    objects = planned(stack).manifests
    found = [(obj["kind"], obj["metadata"]["name"], path, q) for obj in objects for path, q in quantities(obj)]
    wrong = [f for f in found if not isinstance(f[3], str)]
    assert not wrong, f"{stack}: quantities rendered as non-strings (write str(n)): {wrong}"


def test_quantities_walker_finds_the_tpu_request() -> None:
    """The walker reaches what it must: a vLLM Deployment's ``google.com/tpu`` and its cache's ``sizeLimit``."""
    (deployment,) = [o for o in planned("llama-70b").manifests if o["kind"] == "Deployment" and o["metadata"]["name"] == "vllm"]
    paths = {path for path, _ in quantities(deployment)}
    assert any(p.endswith(".limits.google.com/tpu") for p in paths)
    assert any(p.endswith(".sizeLimit") for p in paths)
    # and an integer is caught
    assert list(quantities({"resources": {"limits": {"google.com/tpu": 4}}})) == [(".resources.limits.google.com/tpu", 4)]
