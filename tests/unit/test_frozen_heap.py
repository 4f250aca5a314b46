"""The frozen heap: survivors of full collections are frozen, never garbage; a screen's build holds the collector off."""

from __future__ import annotations

import gc
import weakref

from crdscope.tui.frozen_heap import FrozenHeap


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


def test_a_full_collection_frees_cycles_then_freezes_what_survived():
    home = [True]
    heap = FrozenHeap(may_freeze=lambda: home[0])
    try:
        heap.settle()
        frozen = gc.get_freeze_count()
        kept = [Node() for _ in range(1000)]
        garbage = Node()
        dead = weakref.ref(garbage)
        del garbage
        gc.collect()  # a full collection, as the collector runs on its own
        assert dead() is None, "cyclic garbage was frozen instead of freed"
        assert heap.refreezes == 1 and gc.get_freeze_count() >= frozen + len(kept)
        # While a screen that will be dismissed is up, nothing more is frozen.
        home[0] = False
        gc.collect()
        assert heap.refreezes == 1
    finally:
        heap.thaw()
    assert gc.get_freeze_count() == 0 and heap._after_collection not in gc.callbacks


def test_holding_collections_ends_after_the_first_frame_or_the_fallback():
    heap = FrozenHeap()
    frames = []
    assert gc.isenabled()
    heap.hold_collections(frames.append)
    try:
        assert not gc.isenabled() and len(frames) == 1
        heap.hold_collections(frames.append)  # already held: nothing more to release
        assert len(frames) == 1
        frames[0]()  # the first frame is out
        assert gc.isenabled()
        heap.release_collections()  # the fallback timer after the frame changes nothing
        assert gc.isenabled()
    finally:
        heap.thaw()
        gc.enable()
