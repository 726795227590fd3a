"""Runs the gpu suite that scripts/device/bundle.sh packed (.device/tests.json, from `meson
introspect --tests`) on a machine without meson or this build folder: the paths meson recorded
(source root, build root, the test venv's Python) are mapped onto the carried copy. Prints each
test's output and ends with meson's summary line, `N passed, M failed` (77 counts as skipped).

    python3 scripts/device/run_tests.py [--only NAME,...] [--log FILE]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
BUNDLE = ROOT / ".device"


def remap(value, paths):
    """Each absolute path in `value` (a path, or a PATH-style list) moved from where meson saw it
    to the carried copy."""
    moves = ((paths["venv_python"], sys.executable), (paths["build_root"], str(BUNDLE / "build")),
             (paths["source_root"], str(ROOT)))
    parts = []
    for part in value.split(":"):
        if part.startswith("/"):
            part = os.path.normpath(part)
            for old, new in moves:
                if part == old or part.startswith(old + "/"):
                    part = new + part[len(old):]
                    break
        parts.append(part)
    return ":".join(parts)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="", help="comma-separated test names")
    parser.add_argument("--log", help="also append every test's output to this file")
    args = parser.parse_args()
    if not (BUNDLE / "paths.json").is_file() or not (BUNDLE / "tests.json").is_file():
        print(f"no bundle at {BUNDLE}: run scripts/device/bundle.sh first (and carry .device)", file=sys.stderr)
        return 2
    paths = json.loads((BUNDLE / "paths.json").read_text())
    tests = [t for t in json.loads((BUNDLE / "tests.json").read_text()) if "gpu" in t["suite"] or "libreyolo:gpu" in t["suite"]]
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {t["name"] for t in tests}
        if unknown:
            print(f"--only: no gpu test named {', '.join(sorted(unknown))}; the suite has "
                  f"{', '.join(t['name'] for t in tests)}", file=sys.stderr)
            return 2
        tests = [t for t in tests if t["name"] in wanted]
    log = open(args.log, "a") if args.log else None
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for test in tests:
        env = dict(os.environ)
        env.update({key: remap(str(value), paths) for key, value in test["env"].items()})
        command = [remap(str(part), paths) for part in test["cmd"]]
        workdir = remap(test["workdir"], paths) if test.get("workdir") else str(BUNDLE / "build")
        start = time.monotonic()
        try:
            done = subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True, timeout=test["timeout"])
            code, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as expired:
            code, output = "timeout", (expired.stdout or b"").decode(errors="replace") + (expired.stderr or b"").decode(errors="replace")
        seconds = time.monotonic() - start
        verdict = "skipped" if code == 77 else "passed" if code == 0 else "failed"
        counts[verdict] += 1
        line = f"{test['name']}: {verdict.upper()} (exit {code}, {seconds:.1f} s)"
        print(line, flush=True)
        if log:
            log.write(f"==== {line}\n$ {' '.join(command)}\n{output}\n")
            log.flush()
        if verdict == "failed":
            print(output[-4000:], flush=True)
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped", flush=True)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
