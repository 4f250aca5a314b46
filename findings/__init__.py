"""Findings: the latest samples turned into verdicts that name a cause (UI-free, beside the probes)."""
