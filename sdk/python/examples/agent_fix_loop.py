"""An agent-style loop: write a script, run it, read the traceback, fix, rerun.

The "model" here is a stand-in (a list of successive attempts, each fixing
what the last traceback showed); plug a real LLM call into next_attempt().

    python3 examples/agent_fix_loop.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tinyvmm import Sandbox  # noqa: E402

ATTEMPTS = [
    # 1: a NameError
    "import json\nrows = [3, 4, 5, 6, 7]\nprint(json.dumps({'total': totl(rows)}))\n",
    # 2: a TypeError
    "import json\nrows = ['3', 4, 5, 6, 7]\nprint(json.dumps({'total': sum(rows)}))\n",
    # 3: right
    "import json\nrows = ['3', 4, 5, 6, 7]\nprint(json.dumps({'total': sum(int(r) for r in rows)}))\n",
]


def next_attempt(step: int, last_stderr: str) -> str:
    """Ask the model for a fixed script given the last traceback (stand-in)."""
    if last_stderr:
        print(f"--- the model reads:\n{last_stderr.strip().splitlines()[-1]}")
    return ATTEMPTS[min(step, len(ATTEMPTS) - 1)]


def main() -> int:
    with Sandbox.create(timeout=300) as sb:
        stderr = ""
        for step in range(5):
            sb.files.write("/tmp/task.py", next_attempt(step, stderr))
            r = sb.commands.run("python3 /tmp/task.py", timeout=30)
            print(f"attempt {step + 1}: exit {r.exit_code}")
            if r.ok:
                print("result:", r.stdout.strip())
                return 0
            stderr = r.stderr  # the traceback is a result, not an exception
    print("gave up", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
