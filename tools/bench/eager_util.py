"""What both eager sides of the benches (eager.py, eager_kernels.py) share."""

import os


def mapped(fragment):
    """Paths of the shared objects mapped here whose name contains fragment."""
    paths = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fragment in os.path.basename(fields[5]):
                paths.add(fields[5])
    return ",".join(sorted(paths)) or "none"
