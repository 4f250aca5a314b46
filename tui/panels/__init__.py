"""One panel per probe (plus the loader and the events log), all views over the sample store."""
