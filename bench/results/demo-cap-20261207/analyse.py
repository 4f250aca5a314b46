"""RSS of each lab through the install, from the demo's recordings (the health probe's figures)."""

import json
import sys
from pathlib import Path

from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.inventory import InventorySample
from crdscope.session.replay import read_recording

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/demo-cap")
GIB = 2**30

for path in sorted(OUT.glob("demo.*.jsonl*")):
    recording = read_recording(path)
    start = recording.start or 0.0
    crds = 0
    peak = (0.0, 0, 0.0)
    marks = []
    for sample in recording.samples:
        if isinstance(sample, InventorySample) and not sample.error:
            crds = sample.crds
        if isinstance(sample, HealthSample) and sample.rss_bytes:
            if sample.rss_bytes > peak[0]:
                peak = (sample.rss_bytes, crds, sample.timestamp - start)
            marks.append((sample.timestamp - start, sample.rss_bytes, crds))
    print(path.name, recording.cluster.kubernetes_version)
    print(f"  peak {peak[0] / GIB:.2f} GiB at {peak[2] / 60:.1f} min")
    for minute in range(0, 40, 2):
        near = [m for m in marks if abs(m[0] - minute * 60) < 10]
        if near:
            print(f"  {minute:3d} min: {near[0][1] / GIB:.2f} GiB, CRDs {near[0][2]}")
print(json.loads((OUT / "figures.json").read_text()).get("idle_rss_bytes"))
