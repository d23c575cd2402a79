"""``plan`` shows a gateway front door as it will be applied: the pool's selection, the endpoint picker's
scorers with the source of their weights, and the backend timeout (components/tools/plan_front_door.py)."""

from __future__ import annotations

from components.render import gateway_picker
from components.tools.plan_front_door import WEIGHTS_SOURCE, front_door_lines
from tests.conftest import planned


def test_plan_shows_the_endpoint_picker_configuration_it_renders() -> None:
    text = "\n".join(front_door_lines(planned("llama-405b-vllm")))
    for name, weight in gateway_picker.SCORER_WEIGHTS:
        assert f"{name} x{weight}" in text
    assert gateway_picker.PICKER in text
    assert WEIGHTS_SOURCE in text
    assert "(group leaders only)" in text  # multi-host: the pool selects each LWS group's leader
    assert "backend timeout" in text


def test_plan_front_door_is_silent_for_a_service_front_door() -> None:
    assert front_door_lines(planned("llama-70b-fallback")) == []


def test_plan_front_door_says_when_iap_guards_the_backend() -> None:
    assert "IAP on" in "\n".join(front_door_lines(planned("llama-405b-ironwood")))
    assert "no IAP" in "\n".join(front_door_lines(planned("llama-70b")))
