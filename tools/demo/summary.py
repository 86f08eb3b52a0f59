# The main job's Python program: summarise the CSV it was given.
import csv
import json
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/sales.csv"
with open(path, newline="") as f:
    rows = list(csv.DictReader(f))

revenue = {}
for r in rows:
    revenue[r["region"]] = revenue.get(r["region"], 0.0) + int(r["units"]) * float(r["price"])

print(json.dumps({
    "rows": len(rows),
    "units": sum(int(r["units"]) for r in rows),
    "revenue_by_region": {k: round(v, 2) for k, v in sorted(revenue.items())},
    "top_region": max(revenue, key=revenue.get),
}, indent=2))
