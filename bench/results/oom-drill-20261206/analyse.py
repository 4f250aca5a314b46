import json, glob, os, re
out = "/tmp/drill/out"
rows = []
for watch in sorted(glob.glob(f"{out}/watch-*.txt"), key=lambda p: int(re.search(r"(\d+)", os.path.basename(p)).group(1))):
    i = re.search(r"(\d+)", os.path.basename(watch)).group(1)
    text = open(watch).read()
    deaths_file = f"{out}/lab-logs-{i}/restarts.jsonl"
    deaths = sum(1 for l in open(deaths_file) if l.strip() and json.loads(l).get("event") == "died") if os.path.exists(deaths_file) else None
    restarts = None
    last = None
    rec = f"{out}/drill-{i}.jsonl"
    if os.path.exists(rec):
        for line in open(rec):
            r = json.loads(line)
            if r.get("type") == "sample" and r.get("probe") == "health":
                v = r["data"].get("restarts")
                if v is not None:
                    restarts = v
                    last = r["data"].get("timestamp")
    if deaths is not None and last is not None:  # deaths the watch could have seen: up to its last health sample
        deaths = sum(1 for l in open(deaths_file) if l.strip() and json.loads(l).get("event") == "died"
                     and json.loads(l)["at"] <= last)
    loop = next((l[9:] for l in text.splitlines() if "crash-looping" in l and "opened" in l), "")
    done = "watch completed" in text
    rows.append((i, deaths, restarts, loop[:110], done))
for r in rows:
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3] or 'none'} | {'yes' if r[4] else 'no'} |")
