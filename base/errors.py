"""Errors that reach a person: each renders as one line, with an exit code."""

from __future__ import annotations


class CrdscopeError(Exception):
    """An expected failure with a one-line message for a person.

    The CLI prints ``crdscope: <message>`` and exits with :attr:`exit_code`;
    it never shows a traceback for these.
    """

    exit_code = 1

    def __init__(self, message: str, *, exit_code: int | None = None, detail: str = "") -> None:
        # Keep the message to one line whatever the cause said.
        super().__init__(" ".join(str(message).split()))
        if exit_code is not None:
            self.exit_code = exit_code
        #: Optional lines shown below the message (the tail of a dead process's log).
        self.detail = detail

    def about(self, what: str) -> CrdscopeError:
        """The same error, its line starting with what it is about (``context lab-b: ...``): for a
        command working on several clusters at once."""
        return type(self)(f"{what}: {self}", exit_code=self.exit_code, detail=self.detail)


class ConfigError(CrdscopeError):
    """Bad or missing configuration: kubeconfig, context, flags, settings."""

    exit_code = 2


class ClusterError(CrdscopeError):
    """The cluster could not be reached or refused us (TLS, 401, 403, ...)."""

    exit_code = 3


class LabError(CrdscopeError):
    """The lab cannot be built, started or reached.

    Exit 1, "something failed" (4 is `load`'s alone); a lab that is not up is 3, as a cluster that
    cannot be reached, and a minor it does not know is 2, a bad flag.
    """

    exit_code = 1
