"""The OOM drill's table (bench/RESULTS.md): deaths the lab's supervisor recorded against what each watch
counted and the restart lines it printed (drills 7-10, with each death its own line)."""

import glob
import json
import lzma
import os
import re
from pathlib import Path

#: The kept outputs beside this script (run.sh wrote them to /tmp/drill2/out; recordings kept as .xz).
OUT = os.path.dirname(os.path.abspath(__file__))


def died(path: str, last: float | None) -> int:
    """The supervisor's ``died`` records, up to ``last`` (the watch's last health sample) when given."""
    records = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return sum(1 for r in records if r.get("event") == "died" and (last is None or r["at"] <= last))


def number(path: str) -> int:
    return int(re.search(r"(\d+)", os.path.basename(path)).group(1))


for watch in sorted(glob.glob(f"{OUT}/watch-*.txt"), key=number):
    i = number(watch)
    text = Path(watch).read_text()
    restarts = last = None
    recording = f"{OUT}/drill-{i}.jsonl.xz"
    if os.path.exists(recording):
        with lzma.open(recording, "rt") as handle:
            lines_of_recording = handle.read().splitlines()
        for line in lines_of_recording:
            record = json.loads(line)
            if record.get("type") == "sample" and record.get("probe") == "health" \
                    and record["data"].get("restarts") is not None:
                restarts, last = record["data"]["restarts"], record["data"].get("timestamp")
    deaths_file = f"{OUT}/restarts-{i}.jsonl"
    deaths = died(deaths_file, last) if os.path.exists(deaths_file) else None
    loop = next((line[9:] for line in text.splitlines() if "crash-looping" in line and "opened" in line), "")
    done = "watch completed" in text
    lines = [line for line in text.splitlines() if "API server restarted" in line]
    repeated = len(lines) - len(set(lines))
    print(f"| {i} | {deaths} | {restarts} | {len(lines)} ({repeated} repeated) | {loop[:110] or 'none'} | "
          f"{'yes' if done else 'no'} |")
