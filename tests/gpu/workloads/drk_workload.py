"""What every GPU-suite workload shares: its own counts, written as JSON to
$DRK_TEST_COUNTS (if set) for run.sh to hold against drk's report and CUPTI."""
import json
import os
import sys


def write_counts(workload, **counts):
    """Write {"workload", "pid", **counts}. Known keys: "kernels" (kernel
    name -> launches this program made of it), "launches", "failed_launches",
    "by_api" (driver entry point -> calls)."""
    path = os.environ.get("DRK_TEST_COUNTS")
    if not path:
        return
    doc = {"workload": workload, "pid": os.getpid(), **counts}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def die(workload, message):
    print(f"{workload}: {message}", file=sys.stderr, flush=True)
    sys.exit(1)
