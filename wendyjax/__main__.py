"""Command line: `python -m wendyjax demo [--model NAME] [--noise RATIO] [--seed N]`."""

import argparse
import sys

from . import models


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wendyjax", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="simulate a zoo model and fit it with WENDy-MLE")
    zoo = sorted(n for n in vars(models) if not n.startswith("_") and n != "Benchmark")
    demo.add_argument("--model", default="lorenz", choices=zoo)
    demo.add_argument("--noise", type=float, default=0.1, help="noise ratio (default 0.1)")
    demo.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import demo as run

        run(args.model, args.noise, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
