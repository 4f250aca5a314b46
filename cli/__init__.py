"""The `crdscope` command line: thin click commands over the rooms below (tui, session, lab, ...)."""
