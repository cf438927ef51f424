#!/usr/bin/env bash
# Compiles source files one at a time, with clang -fsyntax-only and the
# build's own include paths and definitions, so that a file lacking an
# #include it uses fails here, although in the build a unity batch-mate
# (UMLAB_UNITY_BUILD, on by default) or the tests' shared precompiled header
# supplies it. Warnings are errors, as in CI.
#   scripts/check-includes.sh              the C++ files changed since HEAD~1, and
#                                          those not committed yet
#   scripts/check-includes.sh FILE...      those files
#   scripts/check-includes.sh --all        every C++ source of the build (about
#                                          15 minutes of CPU; runs nproc at once)
# It configures build-includes/ (each file alone, compile_commands.json) the
# first time; nothing is built. Needs clang (scripts/setup.sh --fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v clang++ >/dev/null; then
  echo "check-includes.sh: clang++ is missing; run scripts/setup.sh --fuzz" >&2
  exit 2
fi
build=build-includes
if [ ! -f "$build/compile_commands.json" ]; then
  cmake -S . -B "$build" -G Ninja -DUMLAB_UNITY_BUILD=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    >/dev/null
else
  # The source lists are globbed: a file added since the last run needs the
  # configuration run again to be in compile_commands.json.
  cmake -S . -B "$build" >/dev/null
fi

files=()
case "${1:-}" in
  --all) mode=all ;;
  "")
    mode=list
    mapfile -t files < <({ git diff --name-only HEAD~1 2>/dev/null; git diff --name-only HEAD
                           git ls-files --others --exclude-standard; } |
                         grep -E '\.(cc|h)$' | sort -u)
    ;;
  -*)
    echo "usage: scripts/check-includes.sh [--all | FILE...]" >&2
    exit 2
    ;;
  *) mode=list; files=("$@") ;;
esac

# One shell command per file: clang++ with the file's -I, -isystem and -D
# flags from the build (optimisation, warnings and the precompiled header
# dropped). A header is checked through a file of its own that includes it.
python3 - "$build/compile_commands.json" "$mode" "${files[@]}" > "$build/check-includes.cmds" <<'EOF'
import json, os, shlex, sys
database, mode, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
root = os.getcwd()
entries = {}
for entry in json.load(open(database)):
    path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    if path.endswith(".cc"):
        entries[path] = entry
def flags_of(entry):
    args = shlex.split(entry["command"])[1:]
    kept, skip = [], False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg in ("-isystem", "-I"):
            kept += [arg, args[i + 1]]
            skip = True
        elif arg.startswith(("-I", "-D", "-isystem")):
            kept.append(arg)
    return kept
check = "clang++ -std=c++20 -Wall -Wextra -Wshadow -Wno-missing-field-initializers -Werror -fsyntax-only"
if mode == "all":
    wanted = sorted(os.path.relpath(p, root) for p in entries)
any_entry = next(iter(entries.values()))
for name in wanted:
    path = os.path.normpath(os.path.join(root, name))
    if path.endswith(".cc"):
        entry = entries.get(path)
        if entry is None:
            print(f"echo 'check-includes.sh: {name} is not in the build; skipped' >&2")
            continue
        flags = flags_of(entry)
        source = shlex.quote(path)
    elif path.endswith(".h") and os.path.exists(path):
        # Its own .cc's flags where it has one, else a neighbour's.
        folder = os.path.dirname(path)
        neighbour = next((e for p, e in entries.items() if os.path.dirname(p) == folder), any_entry)
        entry = entries.get(path[:-2] + ".cc", neighbour)
        flags = flags_of(entry)
        source = f"-x c++ - <<< {shlex.quote('#include ' + chr(34) + os.path.relpath(path, root) + chr(34))} -I{shlex.quote(root)}"
    else:
        continue
    print(f"cd {shlex.quote(entry['directory'])} && {check} {' '.join(shlex.quote(f) for f in flags)} {source} "
          f"&& echo 'ok {name}' || {{ echo 'FAILED {name}'; exit 1; }}")
EOF
count=$(wc -l < "$build/check-includes.cmds")
if [ "$count" -eq 0 ]; then
  echo "check-includes.sh: no C++ files to check"
  exit 0
fi
echo "check-includes.sh: $count files"
if tr '\n' '\0' < "$build/check-includes.cmds" | xargs -0 -P "$(nproc)" -n 1 bash -c; then
  echo "check-includes.sh: every file includes what it uses"
else
  echo "check-includes.sh: a file above lacks an #include (or fails to compile alone)" >&2
  exit 1
fi
