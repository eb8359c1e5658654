"""`celkeeper crds`: celkeeper's CRDs as YAML.

celkeeper crds                      print the ConstraintTemplate and per-pod status CRDs
celkeeper crds --out crds           write them into crds/ (one file each; what the repository commits)
celkeeper crds --template FILE...   print the constraint CRD of every ConstraintTemplate in FILE(s)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from celkeeper.crds import constraint_crd, static_crd_files, to_yaml
from celkeeper.crds.render import HEADER
from celkeeper.documents import Document, parse_documents
from celkeeper.errors import CelkeeperError, DocumentError, Location, TemplateError
from celkeeper.model import JsonObject


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "crds",
        help="print or write celkeeper's CRDs (or the constraint CRDs of templates) as YAML",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", metavar="DIR", type=Path, help="write one file per CRD into DIR")
    parser.add_argument(
        "--template",
        metavar="FILE",
        type=Path,
        nargs="+",
        help="print the constraint CRD of each ConstraintTemplate in these files instead",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.template:
        text = _constraint_crds(args.template)
        if args.out:
            raise CelkeeperError("--out writes celkeeper's own CRDs; print constraint CRDs without it")
        sys.stdout.write(text)
        return 0
    files = static_crd_files()
    if args.out is None:
        sys.stdout.write(HEADER + "".join(content.removeprefix(HEADER) for content in files.values()))
        return 0
    out: Path = args.out
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            target = out / name
            if not target.exists() or target.read_text(encoding="utf-8") != content:
                target.write_text(content, encoding="utf-8")
                print(f"wrote {target}")
            else:
                print(f"unchanged {target}")
    except OSError as err:
        raise CelkeeperError(f"cannot write {err.filename or out}: {err.strerror or err}") from err
    return 0


def _constraint_crds(paths: list[Path]) -> str:
    manifests: list[JsonObject] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise DocumentError(f"cannot read: {err.strerror or err}", Location(file=str(path))) from err
        parsed = parse_documents(text, str(path))
        if parsed.errors:
            raise parsed.errors[0]
        for document in parsed.documents:
            if document.kind == "ConstraintTemplate":
                manifests.append(_constraint_crd(document))
    if not manifests:
        raise CelkeeperError(f"no ConstraintTemplate in {', '.join(str(p) for p in paths)}")
    return to_yaml(manifests)


def _constraint_crd(document: Document) -> JsonObject:
    try:
        return constraint_crd(document.data)
    except TemplateError as err:
        raise document.error(TemplateError, err.message, err.location.path or "") from err
