"""The README's CSV summary job (tools/demo) through the SDK: upload the data
and the script, run it as the unprivileged user, read the JSON it prints.

    python3 examples/csv_summary.py [sales.csv]      # TINYVMM_SOCKET to pick the daemon
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tinyvmm import Sandbox  # noqa: E402

SUMMARY = r'''
import csv, json, sys
with open(sys.argv[1], newline="") as f:
    rows = list(csv.DictReader(f))
revenue = {}
for r in rows:
    revenue[r["region"]] = revenue.get(r["region"], 0.0) + int(r["units"]) * float(r["price"])
print(json.dumps({
    "rows": len(rows),
    "units": sum(int(r["units"]) for r in rows),
    "revenue_by_region": {k: round(v, 2) for k, v in sorted(revenue.items())},
    "top_region": max(revenue, key=revenue.get),
}))
'''

SAMPLE = "region,units,price\nnorth,3,2.50\nsouth,5,1.25\nnorth,2,2.50\neast,7,0.99\n"


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(here, "..", "..", "..", "tools", "demo", "sales.csv")
    path = sys.argv[1] if len(sys.argv) > 1 else default
    with Sandbox.create(timeout=120, metadata={"job": "csv-summary"}) as sb:
        if os.path.exists(path):
            with open(path, "rb") as f:
                sb.files.write("/tmp/sales.csv", f)          # streamed upload
        else:
            sb.files.write("/tmp/sales.csv", SAMPLE)
        sb.files.write("/tmp/summary.py", SUMMARY)
        r = sb.commands.run("python3 /tmp/summary.py /tmp/sales.csv", timeout=30, check=True)
        summary = json.loads(r.stdout)
    print(json.dumps(summary, indent=2))
    print(f"(ran in {r.duration:.3f} s in the guest)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
