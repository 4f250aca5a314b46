"""crdscope's log file: where it is, how logging is routed to it, how a traceback lands in it.

One place for the CLI, the monitor, the replay and the headless watch: logs go to
``$XDG_STATE_HOME/crdscope/crdscope.log`` (a full-screen app has no stderr to spare, and
a person sees one line with the file's path instead of a traceback).
"""

from __future__ import annotations

import logging
import traceback
from pathlib import Path

from .paths import state_dir

LOG_FILE_NAME = "crdscope.log"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: What a one-line message says instead of a path when the log file cannot be written.
NOT_WRITABLE = "(log file not writable)"


def log_path() -> Path:
    """The log file (it may not exist yet)."""
    return state_dir() / LOG_FILE_NAME


def log_to_file(*, errors_to_stderr: bool = False) -> Path | None:
    """Route logging to :func:`log_path` (crdscope's own loggers at INFO, others at WARNING).

    ``errors_to_stderr`` also prints ERROR records on stderr, one line each (the headless
    watch; a full-screen app must not).  Returns the log file, None when it cannot be written
    (then only stderr, if asked, gets anything).
    """
    handlers: list[logging.Handler] = []
    if errors_to_stderr:
        errors = logging.StreamHandler()
        errors.setLevel(logging.ERROR)
        errors.setFormatter(logging.Formatter("crdscope: %(name)s: %(message)s"))
        handlers.append(errors)
    path = log_path()
    written: Path | None = path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        to_file = logging.FileHandler(path, encoding="utf-8")
    except OSError:
        written = None
    else:
        to_file.setFormatter(logging.Formatter(LOG_FORMAT))
        handlers.append(to_file)
    root = logging.getLogger()
    root.handlers[:] = handlers
    root.setLevel(logging.WARNING)
    logging.getLogger("crdscope").setLevel(logging.INFO)
    return written


def write_traceback(exc: BaseException) -> str:
    """Append ``exc``'s traceback to the log file; returns the file's path, or :data:`NOT_WRITABLE`."""
    path = log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("".join(traceback.format_exception(exc)))
    except OSError:
        return NOT_WRITABLE
    return str(path)
