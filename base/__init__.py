"""Foundations every other room imports: errors, XDG paths, typed settings, logs, the sample base, quantities.

Nothing here imports another crdscope package."""
