"""Control from a viewer, when a collector allows it (``--serve-view ... --allow-control``).

A collector is read-only by default: its viewers watch, and ``POST /v1/control`` answers 403.  With
``--allow-control``, each watched cluster has a :class:`ClusterControl` on the collector: the loader
(a :class:`session.loader_control.LoaderControl` on the collector's own monitor, its progress taken
by the collector's core, so every viewer and the recording see it) and, on a crdscope lab, the
lab's faults.  The command line's safety rules hold unchanged: a cluster that is not a crdscope lab
is loaded or cleaned only when the collector's ``--context`` named it, and clean deletes only
CRDs that carry crdscope's label and are still the ones listed.

On the viewer, :class:`RemoteLoader` and :class:`RemoteFaults` offer the same actions as the live
monitor's loader and lab, sent to the collector; what they cause comes back on the stream.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import httpx

from crdscope.base.errors import CrdscopeError
from crdscope.base.samples.loader import LoaderSample
from crdscope.base.settings import LoaderSettings
from crdscope.loader.safety import CleanItem, CleanPlan

from .loader_control import LoaderChoice, LoaderControl
from .viewstream import JSONObject

if TYPE_CHECKING:
    from .attach import Collector
    from .core import WatchCore
    from .live import LiveCore

log = logging.getLogger("crdscope.control")

LOADER_ACTIONS = ("start", "pause", "resume", "stop", "clean-plan", "clean")
FAULT_ACTIONS = ("kill", "stop", "start")
FAULT_COMPONENTS = ("apiserver", "etcd")


class FaultTarget(Protocol):
    """What the palette's fault actions call: a lab's (``lab.controlplane.Lab``), or a collector's."""

    def kill(self, component: str) -> object: ...

    def stop(self, component: str) -> object: ...

    def start(self, component: str) -> object: ...


class ControlRefusedError(CrdscopeError):
    """A control request that cannot be done (bad action, wrong state, no lab): one line."""

    exit_code = 2


def plan_to_json(plan: CleanPlan) -> JSONObject:
    return dataclasses.asdict(plan)


def plan_from_json(data: JSONObject) -> CleanPlan:
    try:
        items = tuple(CleanItem(**item) for item in data["items"])
        return CleanPlan(server=str(data["server"]), context=str(data["context"]), run_id=data.get("run_id"),
                         items=items)
    except (KeyError, TypeError) as exc:
        raise ControlRefusedError(f"not a clean plan: {exc}") from None


class ClusterControl:
    """The collector's side: one cluster's loader and (on a lab) faults, driven by viewers."""

    def __init__(self, live: LiveCore, settings: LoaderSettings, *, context_flag: str | None) -> None:
        self.live = live
        self.loader = LoaderControl(live.monitor, settings, context_flag=context_flag)
        self.loader.add_sink(live.core.take)  # progress on the stream, in the recording, in the findings
        self._loading: asyncio.Task[LoaderSample | None] | None = None

    async def handle(self, request: JSONObject) -> JSONObject:
        """One request (``{"loader": ACTION, ...}`` or ``{"fault": ACTION, "component": ...}``) -> its answer."""
        if "loader" in request:
            return await self._loader(str(request["loader"]), request)
        if "fault" in request:
            return await self._fault(str(request["fault"]), str(request.get("component", "")))
        raise ControlRefusedError("a control request names a loader action or a fault")

    async def _loader(self, action: str, request: JSONObject) -> JSONObject:
        loader = self.loader
        if action == "start":
            if self._loading is not None and not self._loading.done():
                raise ControlRefusedError(f"the loader is {loader.state}: stop it first")
            try:
                loader.configure(str(request.get("source") or loader.source),
                                 str(request.get("profile") or loader.settings.profile),
                                 float(request.get("rate") or loader.settings.rate),
                                 int(request.get("concurrency") or loader.settings.concurrency))
            except (TypeError, ValueError) as exc:
                raise ControlRefusedError(f"a loader start with a bad pace: {exc}") from None
            self._loading = asyncio.create_task(loader.run(), name="collector-loader")
            return {"message": f"loader started on the collector: {loader.source} ({loader.describe()})"}
        if action in ("pause", "resume", "stop"):
            getattr(loader, action)()
            return {"message": f"loader: {action} sent (it was {loader.state})"}
        if action == "clean-plan":
            return {"plan": plan_to_json(await loader.clean_plan())}
        if action == "clean":
            return {"message": await loader.clean(plan_from_json(request.get("plan") or {}))}
        raise ControlRefusedError(f"unknown loader action {action!r} (one of: {', '.join(LOADER_ACTIONS)})")

    async def _fault(self, action: str, component: str) -> JSONObject:
        if action not in FAULT_ACTIONS or component not in FAULT_COMPONENTS:
            raise ControlRefusedError(f"unknown fault {action} {component}")
        from crdscope.lab.lookup import lab_for_server

        found = await asyncio.to_thread(lab_for_server, self.live.cluster.server, self.live.lab_home)
        if found is None:
            raise ControlRefusedError("faults need a crdscope lab: this collector watches another cluster")
        lab = found[0]
        try:
            pid = await asyncio.to_thread(getattr(lab, action), component)
        except Exception as exc:  # noqa: BLE001 - a lab's own error becomes one line for the viewer
            raise ControlRefusedError(f"lab {action} {component}: {exc}") from None
        return {"message": f"lab {action} {component} (pid {pid})", "pid": pid}


# --------------------------------------------------------------------------- the viewer's side


class RemoteLoader(LoaderChoice):
    """The loader's actions sent to the collector (the interface of
    :class:`session.loader_control.LoaderControl`); its state is read from the loader's samples
    that come back on the stream."""

    def __init__(self, collector: Collector, cluster: str, core: WatchCore, settings: LoaderSettings, *,
                 notify: Callable[[str], None] | None = None) -> None:
        super().__init__(settings)
        self.collector = collector
        self.cluster = cluster
        self.core = core
        #: Told the collector's answer to an action that returns at once (pause, resume, stop).
        self.notify = notify or (lambda line: log.info("%s", line))
        self._sent: set[asyncio.Task[object]] = set()

    @property
    def state(self) -> str:
        latest = self.core.store.latest_of(LoaderSample)
        return latest.state if latest is not None else "idle"

    def describe(self) -> str:
        return f"on the collector: {self.pace()}"

    async def run(self) -> LoaderSample | None:
        """Ask the collector to load (its progress arrives on the stream); None: it runs there."""
        try:
            answer = await self._post({"loader": "start", "source": self.source, "profile": self.settings.profile,
                                       "rate": self.settings.rate, "concurrency": self.settings.concurrency})
        except CrdscopeError as exc:
            self.notify(str(exc))
            return None
        self.notify(str(answer.get("message", "")))
        return None

    def pause(self) -> None:
        self._send({"loader": "pause"})

    def resume(self) -> None:
        self._send({"loader": "resume"})

    def stop(self) -> None:
        self._send({"loader": "stop"})

    async def clean_plan(self) -> CleanPlan:
        return plan_from_json((await self._post({"loader": "clean-plan"})).get("plan") or {})

    async def clean(self, plan: CleanPlan) -> str:
        return str((await self._post({"loader": "clean", "plan": plan_to_json(plan)})).get("message", ""))

    def _send(self, request: JSONObject) -> None:
        async def send() -> None:
            try:
                self.notify(str((await self._post(request)).get("message", "")))
            except CrdscopeError as exc:
                self.notify(str(exc))

        task: asyncio.Task[object] = asyncio.get_running_loop().create_task(send())
        self._sent.add(task)
        task.add_done_callback(self._sent.discard)

    async def _post(self, request: JSONObject) -> JSONObject:
        async with self.collector.client() as client:
            try:
                response = await client.post("/v1/control", params={"cluster": self.cluster}, json=request,
                                             headers={"Authorization": f"Bearer {self.collector.token()}"},
                                             timeout=httpx.Timeout(10.0, read=330.0))  # a clean waits
            except httpx.HTTPError as exc:
                raise CrdscopeError(f"the collector did not answer: {type(exc).__name__}: {exc}") from None
        return answer_of(response)


class RemoteFaults:
    """The lab's faults sent to the collector (called from a thread worker, as a lab's are)."""

    def __init__(self, collector: Collector, cluster: str) -> None:
        self.collector = collector
        self.cluster = cluster

    def kill(self, component: str) -> object:
        return self._fault("kill", component)

    def stop(self, component: str) -> object:
        return self._fault("stop", component)

    def start(self, component: str) -> object:
        return self._fault("start", component)

    def _fault(self, action: str, component: str) -> object:
        """The pid the collector's lab names (as a lab's own fault returns it)."""
        try:
            response = httpx.post(f"{self.collector.url}/v1/control", params={"cluster": self.cluster},
                                  json={"fault": action, "component": component}, timeout=120,
                                  headers={"Authorization": f"Bearer {self.collector.token()}"},
                                  verify=self.collector.verify())
        except httpx.HTTPError as exc:
            raise CrdscopeError(f"the collector did not answer: {type(exc).__name__}: {exc}") from None
        return answer_of(response).get("pid")


def answer_of(response: httpx.Response) -> JSONObject:
    """A control answer's JSON, or its one-line error as a :class:`CrdscopeError`."""
    try:
        data = response.json()
    except ValueError:
        data = {}
    if response.status_code != 200:
        raise CrdscopeError(str(data.get("error") or f"the collector answered HTTP {response.status_code}"))
    return data if isinstance(data, dict) else {}
