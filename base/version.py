"""crdscope's version, and the User-Agent every request to a cluster carries."""

import os as _os
import sys as _sys


def _installed_version() -> str:
    """crdscope's version from its ``*.dist-info/METADATA``.

    Read directly: ``importlib.metadata`` imports the email package to parse that file,
    which every one-shot command would pay at start-up (issue 18).
    """
    for entry in _sys.path:
        try:
            names = _os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("crdscope-") and name.endswith(".dist-info"):
                try:
                    with open(_os.path.join(entry, name, "METADATA"), encoding="utf-8") as handle:
                        for line in handle:
                            if line.startswith("Version:"):
                                return line.split(":", 1)[1].strip()
                except OSError:
                    continue
    from importlib import metadata

    try:
        return metadata.version("crdscope")
    except metadata.PackageNotFoundError:  # running from a source tree without install
        return "0.0.0+src"


__version__ = _installed_version()

#: Sent with every request crdscope makes, so a server's audit log and APF name the monitor.
USER_AGENT = f"crdscope/{__version__}"
