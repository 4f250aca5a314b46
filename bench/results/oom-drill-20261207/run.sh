#!/bin/bash
# OOM drill (issue 40 item 5): a 1.37 lab capped at 700Mi, watch --headless, then load synthetic:600.
# Drills 7-10 (2026-12-07), with the restart lines fixed (each death its own line, named once).
C=/work/main/.venv/bin/crdscope
OUT=/tmp/drill2/out; mkdir -p $OUT
for i in $(seq 7 10); do
  [ -e /tmp/drill2/stop ] && break
  $C lab up --name drill --memory-limit 700Mi > $OUT/lab-up-$i.txt 2>&1 || { echo "lab up failed $i" >> $OUT/summary.txt; $C lab down --name drill; continue; }
  K=$($C lab status --name drill --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['kubeconfig'])")
  X=$($C lab status --name drill --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['context'])")
  $C watch --headless --duration 200s --kubeconfig $K --context $X --record $OUT/drill-$i.jsonl > $OUT/watch-$i.txt 2>&1 &
  W=$!
  for t in $(seq 1 60); do [ -s $OUT/watch-$i.txt ] && break; sleep 0.5; done
  timeout 150 $C load synthetic:600 --kubeconfig $K --context $X > $OUT/load-$i.txt 2>&1
  wait $W
  $C lab status --name drill --json > $OUT/lab-status-$i.json 2>&1
  cp -r $(python3 -c "import json; print(json.load(open('$OUT/lab-status-$i.json')).get('run_dir',''))")/logs $OUT/lab-logs-$i 2>/dev/null
  $C lab down --name drill > /dev/null 2>&1
  echo "drill $i: watch restart lines: $(grep -ci 'restart' $OUT/watch-$i.txt), crash-loop lines: $(grep -ci 'crash' $OUT/watch-$i.txt)" >> $OUT/summary.txt
done
echo DONE >> $OUT/summary.txt
