"""Regenerate shoal/v1/ from proto/shoal/v1/*.proto (the one way to make generated code).

`python scripts/gen_proto.py --check` fails when the committed code is stale (used by CI).
"""

from __future__ import annotations

import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUT_DIR = ROOT / "shoal" / "v1"


def generate(dest: Path) -> None:
    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in (PROTO_DIR / "shoal" / "v1").glob("*.proto"))
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"--python_out={dest}",
        f"--grpc_python_out={dest}",
        f"--mypy_out={dest}",
        f"--mypy_grpc_out={dest}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


def main() -> int:
    check = "--check" in sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        fresh = Path(tmp) / "shoal" / "v1"
        names = sorted(p.name for p in fresh.iterdir() if p.is_file())
        if check:
            stale = [
                n
                for n in names
                if not (OUT_DIR / n).exists() or not filecmp.cmp(fresh / n, OUT_DIR / n, shallow=False)
            ]
            if stale:
                print("generated code is stale; run: python scripts/gen_proto.py", *stale, sep="\n  ")
                return 1
            return 0
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        for n in names:
            shutil.copyfile(fresh / n, OUT_DIR / n)
        init = OUT_DIR / "__init__.py"
        if not init.exists():
            init.write_text('"""Generated protobuf and gRPC code (scripts/gen_proto.py); do not edit."""\n')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
