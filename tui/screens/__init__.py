"""Screens of the monitor: the main monitor, help, and modal dialogs."""
