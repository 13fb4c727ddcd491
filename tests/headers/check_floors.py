#!/usr/bin/env python3
"""No library includes a header of a library above it (or beside it without a declared dependency).

Every C++/CUDA source and header under a library folder is read; each #include of a resil header is
resolved to the folder that owns it (a quoted include next to the file first, then each library's
include/ directories), and the owner must be the file's own library or one it may depend on
(FLOORS below, the table of shared/DESIGN.md). Relative paths that climb out of a library
("../../storage/src/x.hpp") resolve to the folder they reach and are judged the same way.

Usage: check_floors.py SOURCE_DIR         check the tree; one line per offending include, exit 1
       check_floors.py --self-test        a tree with an include one floor up must be refused
"""
import os
import re
import sys
import tempfile

# library folder -> the library folders its files may include (besides its own).
FLOORS = {
    "core": [],
    "libckpt": ["core"],
    "libec": ["core"],
    "datasets": ["core"],
    "injectors/formats": ["core"],
    "injectors/storage": ["core", "libckpt", "injectors/formats"],
    "injectors/flips": ["core", "libckpt", "injectors/formats", "injectors/storage"],
    "campaigns": ["core", "libckpt", "injectors/formats", "injectors/storage", "injectors/flips"],
    "trainers": ["core", "libckpt", "datasets"],
    "trainers/ecrm": ["core", "libckpt", "libec", "datasets", "trainers"],
    "apps/common": ["core", "libckpt", "datasets", "trainers"],
}
# Headers generated into the build tree, owned by core (what the build was configured with).
GENERATED = {"resil/config.hpp": "core"}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
SUFFIXES = (".hpp", ".h", ".cpp", ".cu", ".cuh", ".inl")


def owner_of(rel, libs):
    """The library folder a path (relative to the source root) lies in: the longest prefix."""
    best = None
    for lib in libs:
        if rel == lib or rel.startswith(lib + "/"):
            if best is None or len(lib) > len(best):
                best = lib
    return best


def check(root):
    libs = sorted(FLOORS)
    include_dirs = []  # (library, absolute include directory)
    for lib in libs:
        base = os.path.join(root, lib)
        for dirpath, dirnames, _ in os.walk(base):
            dirnames[:] = [d for d in dirnames if owner_of(os.path.relpath(os.path.join(dirpath, d), root), libs) == lib]
            if os.path.basename(dirpath) == "include":
                include_dirs.append((lib, dirpath))
    problems = []
    checked = 0
    for lib in libs:
        base = os.path.join(root, lib)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if owner_of(os.path.relpath(os.path.join(dirpath, d), root), libs) == lib]
            for name in sorted(filenames):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                checked += 1
                for m in INCLUDE.finditer(text):
                    kind, inc = m.group(1), m.group(2)
                    target = None
                    if kind == '"':
                        near = os.path.normpath(os.path.join(dirpath, inc))
                        if os.path.exists(near):
                            target = owner_of(os.path.relpath(near, root), libs) or "outside the libraries"
                    if target is None:
                        for owner, d in include_dirs:
                            if os.path.exists(os.path.join(d, inc)):
                                target = owner
                                break
                    if target is None:
                        target = GENERATED.get(inc)
                    if target is None:
                        if inc.startswith("resil/"):
                            line = text.count("\n", 0, m.start()) + 1
                            problems.append(f"{rel}:{line}: #include {kind}{inc}: no library owns this header")
                        continue  # a system or third-party header
                    if target != lib and target not in FLOORS[lib]:
                        line = text.count("\n", 0, m.start()) + 1
                        problems.append(f"{rel}:{line}: #include {kind}{inc}: {lib}/ may not include {target}/ "
                                        f"(it may include: {', '.join(FLOORS[lib]) or 'nothing else'})")
    return checked, problems


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def put(rel, text):
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        put("core/include/resil/core/error.hpp", "#pragma once\n")
        put("injectors/storage/include/resil/inject/storage.hpp", '#include "resil/core/error.hpp"\n')
        put("injectors/flips/include/resil/inject/plan.hpp", '#include "resil/inject/storage.hpp"\n')
        put("campaigns/include/resil/campaign/campaign.hpp", '#include "resil/inject/plan.hpp"\n')
        put("campaigns/src/trial.hpp", "#pragma once\n")
        n, problems = check(root)
        assert n == 5 and not problems, problems
        # One floor up: storage including a flips header, flips a campaign header, core anything.
        put("injectors/storage/src/storage.cpp", '#include "resil/inject/plan.hpp"\n')
        put("injectors/flips/src/apply.cpp", '#include <vector>\n#include "resil/campaign/campaign.hpp"\n')
        put("core/include/resil/core/fd.hpp", '#include "resil/inject/storage.hpp"\n')
        # A relative path out of the library into a campaign's private header.
        put("injectors/flips/src/raw.cpp", '#include "../../../campaigns/src/trial.hpp"\n')
        n, problems = check(root)
        expect = ["injectors/storage/src/storage.cpp:1:", "injectors/flips/src/apply.cpp:2:",
                  "core/include/resil/core/fd.hpp:1:", "injectors/flips/src/raw.cpp:1:"]
        for e in expect:
            assert any(p.startswith(e) for p in problems), (e, problems)
        assert len(problems) == len(expect), problems
    print("check_floors self-test: 4 includes one floor up refused, the allowed ones passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    checked, problems = check(root)
    for p in problems:
        print(p)
    if checked == 0:
        print(f"check_floors: no library source under {root}", file=sys.stderr)
        return 2
    print(f"check_floors: {checked} files, {len(problems)} includes of a library above or beside")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
