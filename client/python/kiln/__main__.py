"""`kiln`, the cache's command-line tool (README.md, docs/OPERATIONS.md), as
the installed package's console script and as `python -m kiln`: it runs the
binary installed beside this file (or built in the checkout it is in), which
starts the kilnd beside it when none is running."""
import os
import sys


def main():
    from . import _tool_path
    cli = _tool_path("kiln", "tools", "kiln", "kiln")
    if not cli:
        sys.exit("kiln: the command-line tool is not installed with this package: install Kiln's "
                 "wheel, or run `bazel build -c opt //:kiln //:kilnd` in the Kiln checkout")
    os.execv(cli, [cli, *sys.argv[1:]])


if __name__ == "__main__":
    main()
