"""The OOM drill's table (bench/RESULTS.md): deaths the lab's supervisor recorded against what each watch counted."""

import glob
import json
import os
import re
from pathlib import Path

OUT = "/tmp/drill/out"


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
    recording = f"{OUT}/drill-{i}.jsonl"
    if os.path.exists(recording):
        for line in Path(recording).read_text().splitlines():
            record = json.loads(line)
            if record.get("type") == "sample" and record.get("probe") == "health" \
                    and record["data"].get("restarts") is not None:
                restarts, last = record["data"]["restarts"], record["data"].get("timestamp")
    deaths_file = f"{OUT}/lab-logs-{i}/restarts.jsonl"
    deaths = died(deaths_file, last) if os.path.exists(deaths_file) else None
    loop = next((line[9:] for line in text.splitlines() if "crash-looping" in line and "opened" in line), "")
    done = "watch completed" in text
    print(f"| {i} | {deaths} | {restarts} | {loop[:110] or 'none'} | {'yes' if done else 'no'} |")
