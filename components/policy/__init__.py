"""Guardrails: pure policy rules (``rules``) and the Pulumi policy pack that enforces them."""
