"""The project's lock of readings, ``checks.lock``: check it, or write it after review.

``python -m attnlab.experiments.lock`` prints what differs between the claims every experiment declares and the
lock (exit 1 when anything does); ``--write`` records new claims and revised readings after you reviewed them and
refuses a reading changed without a :class:`~attnlab.verify.Revision`; ``--retire KEY=WHY`` retires a locked claim
that no experiment declares any more; ``--only NAME`` (repeatable) restricts both to the named experiments and
leaves the rest of the lock as it is; ``--migrate`` rewrites a format-1 lock in format 2 once (whose revision
digests cover the recorded date, reason and outcomes too), after checking that it is current under format 1
(:func:`~attnlab.verify.lock.migrate_lock`). ``tests/experiments/test_lock.py`` fails while the lock is not current.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from attnlab._validation import ValidationError
from attnlab.experiments.registry import REGISTRY
from attnlab.verify.lock import lock_entries, lock_problems, migrate_lock, only_experiments, read_lock, write_lock

__all__ = ["LOCK_FILE", "main"]

LOCK_FILE = "checks.lock"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m attnlab.experiments.lock [--write | --migrate] [--retire KEY=WHY ...] [--lock checks.lock]``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="record new claims and revised readings")
    parser.add_argument("--retire", action="append", default=[], metavar="KEY=WHY", help="retire a locked claim")
    parser.add_argument("--lock", default=LOCK_FILE, help="the lock file (default: checks.lock)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME", help="only these experiments")
    parser.add_argument("--migrate", action="store_true", help="rewrite a current format-1 lock in format 2, once")
    args = parser.parse_args(argv)
    if args.migrate:
        if args.only or args.write or args.retire:
            parser.error("--migrate rewrites the whole lock, alone: no --only, --write or --retire")
        try:
            migrated = migrate_lock(args.lock, REGISTRY.list())
        except ValidationError as err:
            print(err)
            return 1
        print(f"{args.lock}: {len(migrated)} claims rewritten in lock format 2 (revision digests cover the record)")
        return 0
    retire = dict(item.split("=", 1) for item in args.retire if "=" in item)
    if len(retire) != len(args.retire):
        parser.error("--retire takes KEY=WHY, e.g. --retire 'mirror-descent.e1/old-row=replaced by lem20-correlation'")
    experiments = [REGISTRY.get(name) for name in args.only] or REGISTRY.list()
    entries = lock_entries(experiments)
    try:
        whole = read_lock(args.lock)
    except ValidationError as err:  # a lock of another format
        print(err)
        return 1
    lock = only_experiments(whole, [e.name for e in experiments])
    rest = {key: {k: v for k, v in whole[key].items() if k not in lock[key]} for key in ("claims", "retired")}
    if args.write:
        try:
            recorded = write_lock(args.lock, entries, lock, retire, keep=rest)
        except ValidationError as err:
            print(err)
            return 1
        print("\n".join(recorded) or "the lock was current")
        return 0
    pending, refused = lock_problems(entries, lock)
    for line in refused:
        print(f"refused: {line}")
    for line in pending:
        print(f"pending review (--write records it): {line}")
    return 1 if pending or refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
