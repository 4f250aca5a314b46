"""Sessions: events worth a person's attention, recording, replay, reports, headless watch, exporter.

Everything here is UI-free (no textual, no rich): the TUI, the headless
watcher and the report all use the same pieces.
"""
