"""`celkeeper certs`: a development CA and a serving certificate for the webhook.

celkeeper certs --out .dev/certs --dns localhost --ip 127.0.0.1
    writes ca.crt + ca.key (kept when both already exist) and tls.crt + tls.key (always new,
    signed by that CA). Running it again rotates the serving certificate: a running
    `celkeeper serve` picks the new files up without a restart.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "certs",
        help="write a development CA and a serving certificate for given DNS names/IPs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", metavar="DIR", type=Path, required=True, help="directory to write into")
    parser.add_argument(
        "--dns",
        metavar="NAME",
        action="append",
        default=[],
        help="DNS name of the server (repeatable), e.g. celkeeper.celkeeper-system.svc",
    )
    parser.add_argument(
        "--ip", metavar="ADDRESS", action="append", default=[], help="IP address of the server (repeatable)"
    )
    parser.add_argument(
        "--days", type=int, default=365, help="validity of the serving certificate in days (default 365)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from celkeeper.tls import TLSConfigError, write_certificates

    if not args.dns and not args.ip:
        raise TLSConfigError("give at least one --dns NAME or --ip ADDRESS")
    if args.days < 1:
        raise TLSConfigError("--days must be at least 1")
    files = write_certificates(args.out, args.dns, args.ip, days=args.days)
    names = ", ".join([*args.dns, *args.ip])
    print(f"wrote {files.cert} and {files.key} (for {names}, valid {args.days} days)")
    print(
        f"{'reused' if files.ca_reused else 'wrote'} the CA {files.ca_cert} and {files.ca_key}; "
        f"clients trust {files.ca_cert}"
    )
    return 0
