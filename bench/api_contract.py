"""R6 at full size: the API contract with every schemathesis phase and more examples, every role.

Runs tests/test_api_contract.py::test_full_api_contract (examples, coverage, fuzzing and stateful phases;
``--examples`` per operation in the generated phases) against a live server on the pytest test database:
uvicorn serving the ASGI application (what production runs, the /mcp dispatch in front of Django; about
5x the time of WSGI: 4 examples took 500 s on 2 cores) or, with ``--server wsgi``, a threaded WSGI server.
Then prints the figure: requests, failures by check, elapsed, and the load average.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> python bench/api_contract.py [--examples 25] [--server wsgi]
"""

from __future__ import annotations

import argparse
import sys

from _fullsize import run_fullsize_test

TEST = "tests/test_api_contract.py::test_full_api_contract"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=25, help="examples per operation (default 25)")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument(
        "--server", choices=("asgi", "wsgi"), default="asgi", help="what serves the API (asgi)"
    )
    args = parser.parse_args()
    run = run_fullsize_test(
        TEST,
        {
            "HITL_CONTRACT_EXAMPLES": str(args.examples),
            "HITL_CONTRACT_SEED": str(args.seed),
            "HITL_CONTRACT_SERVER": args.server,
        },
    )
    figure = [line for line in run.stdout.splitlines() if line.startswith(("R6 ", "  "))]
    print("\n".join(figure) or run.stdout[-3000:])
    print(f"wall time {run.elapsed:.0f} s; load average: {run.load}")
    if run.returncode:
        print(run.tail())
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
