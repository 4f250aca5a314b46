"""The Textual monitor and the ``crdscope`` command line."""
