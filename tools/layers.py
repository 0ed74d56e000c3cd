#!/usr/bin/env python3
"""Prints the SDK's room-to-room edges and fails on one not declared.

The rooms and what each may use are declared once, in sdk/CMakeLists.txt
(and sdk/cupti/cupti.cmake), as trainscope_room(<name> USES <rooms...> ...).
The build already refuses an include of a room that is not reachable (each
room's include path shows only the rooms it uses); this check is stricter:
an edge must be named in the room's own USES, not only reachable through
one of them. Every folder of sdk/ must be a room.

  tools/layers.py [REPO_ROOT]     exit 0: all edges declared; 1: not
"""
import collections
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
sdk = root / "sdk"

uses = {}
for cmake in [sdk / "CMakeLists.txt", sdk / "cupti" / "cupti.cmake"]:
    text = re.sub(r"#[^\n]*", "", cmake.read_text())
    for call in re.finditer(r"trainscope_room\(([^)]*)\)", text):
        words = call.group(1).split()
        if not words or words[0].startswith("<"):
            continue
        name, declared, key = words[0], set(), None
        for word in words[1:]:
            if word in ("USES", "SOURCES"):
                key = word
            elif key == "USES":
                declared.add(word)
        uses.setdefault(name, set()).update(declared)

errors = []
folders = sorted(p.name for p in sdk.iterdir() if p.is_dir())
for folder in folders:
    if folder not in uses:
        errors.append(f"sdk/{folder}/ is not a room: declare it with trainscope_room in "
                      "sdk/CMakeLists.txt")

include = re.compile(r'^\s*#\s*include\s+"sdk/([a-z_]+)/', re.M)
edges = collections.defaultdict(collections.Counter)  # room -> used room -> includes
for folder in folders:
    for source in sorted((sdk / folder).glob("*")):
        if source.suffix not in (".h", ".cc"):
            continue
        for line_no, line in enumerate(source.read_text().splitlines(), 1):
            match = include.match(line)
            if not match or match.group(1) == folder:
                continue
            used = match.group(1)
            edges[folder][used] += 1
            if used not in uses.get(folder, set()):
                errors.append(f"sdk/{folder}/{source.name}:{line_no}: includes sdk/{used}/, "
                              f"which room {folder} does not use (USES "
                              f"{' '.join(sorted(uses.get(folder, set()))) or 'nothing'})")

print("sdk rooms and their edges (includes):")
for folder in folders:
    used = ", ".join(f"{u} ({n})" for u, n in sorted(edges[folder].items())) or "-"
    unused = sorted(uses.get(folder, set()) - set(edges[folder]))
    note = f"   [declared, not included: {' '.join(unused)}]" if unused else ""
    print(f"  {folder:<11} -> {used}{note}")
for error in errors:
    print("layers: " + error, file=sys.stderr)
sys.exit(1 if errors else 0)
