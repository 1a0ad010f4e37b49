"""Run onnxruntime's own Python API tests against onnxruntime and against onnxrt.

    python tools/ort_api_suite.py PATH_TO_ONNXRUNTIME_CHECKOUT [-k EXPR] [--json OUT]
                                  [--set api|ep|all | --files NAME.py ...]

The upstream files of a set (``api``, the default: onnxruntime_test_python.py,
onnxruntime_test_python_iobinding.py, onnxruntime_test_python_sparse_matmul.py; ``ep``: the
EP-device API's onnxruntime_test_python_autoep.py and
onnxruntime_test_python_ep_compatibility.py; ``all``: both), or the files named with
``--files``, run unmodified, twice, each time in a fresh process:
once with the installed onnxruntime package, once with ``onnxruntime`` mapped to onnxrt by
``onnxrt.install_as_onnxruntime()`` (import aliasing only). The score is X/Y: of the Y tests that
pass on onnxruntime's CPU package, X also pass on onnxrt. A test that fails or is skipped on
onnxruntime too (a model file absent from the checkout, a custom-op library that was never
built, a CUDA-only path) is not counted. Every remaining failure is printed with its reason.

The test files and the test data are copied into a scratch folder (never into this
repository) laid out like onnxruntime's build folder, where these tests normally run (its
build copies ``testdata`` there too): the working directory holds ``testdata`` and
``python/`` holds the tests, so tests that write next to their models (optimized models,
external initializers, adapters) do not write into the checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SETS = {
    "api": ("onnxruntime_test_python.py", "onnxruntime_test_python_iobinding.py",
            "onnxruntime_test_python_sparse_matmul.py"),
    "ep": ("onnxruntime_test_python_autoep.py", "onnxruntime_test_python_ep_compatibility.py"),
}
SETS["all"] = SETS["api"] + SETS["ep"]
FILES = SETS["api"]
# modules the test files import, copied beside them where the checkout has them
HELPERS = ("helper.py", "autoep_helper.py")

# runs inside the child process: alias (or not), then pytest with a recorder plugin
_DRIVER = r"""
import json, sys
mode, out_path = sys.argv[1], sys.argv[2]
if mode == "onnxrt":
    import onnxrt
    onnxrt.install_as_onnxruntime()
import pytest

class Recorder:
    def __init__(self):
        self.results = {}

    def pytest_runtest_logreport(self, report):
        nid = report.nodeid
        prev = self.results.get(nid)
        if report.when == "call" or report.outcome != "passed":
            if prev is not None and prev[0] != "passed" and report.outcome == "passed":
                return
            reason = ""
            if report.outcome == "failed":
                crash = getattr(report.longrepr, "reprcrash", None)
                reason = crash.message if crash is not None else str(report.longrepr)
            elif report.outcome == "skipped":
                lr = report.longrepr
                reason = lr[2] if isinstance(lr, tuple) else str(lr)
            self.results[nid] = (report.outcome, reason.strip().splitlines()[0][:300]
                                 if reason.strip() else "")
        elif prev is None:
            self.results[nid] = ("passed", "")

    def pytest_collectreport(self, report):
        # a file that does not even import: every test in it is missing
        if report.failed:
            text = str(report.longrepr).strip().splitlines()
            errs = [ln for ln in text if ln.startswith("E ")] or text[-1:]
            self.results["collect:" + report.nodeid] = ("error", errs[-1][:300] if errs else "")

rec = Recorder()
args = ["-q", "-p", "no:cacheprovider", "--continue-on-collection-errors", "-c", "pytest.ini",
        "--rootdir", ".",
        "-o", "python_files=*.py", "-W", "ignore::DeprecationWarning"] + sys.argv[3:]
code = pytest.main(args, plugins=[rec])
with open(out_path, "w") as f:
    json.dump(rec.results, f)
impl = sys.modules["onnxruntime"]
print("implementation:", getattr(impl, "__file__", impl), file=sys.stderr)
"""


def _scratch(checkout: Path, files: tuple[str, ...]) -> Path:
    """A scratch folder laid out like onnxruntime's build folder."""
    src = checkout / "onnxruntime" / "test"
    missing = [f for f in files if not (src / "python" / f).is_file()]
    if missing:
        raise SystemExit(f"{checkout} does not look like an onnxruntime checkout with these "
                         f"tests: {', '.join(str(src / 'python' / f) for f in missing)} "
                         f"missing")
    root = Path(tempfile.mkdtemp(prefix="ort_api_suite_"))
    pydir = root / "python"
    pydir.mkdir()
    for name in (*files, *(h for h in HELPERS if (src / "python" / h).is_file())):
        shutil.copy2(src / "python" / name, pydir / name)
    # both ./testdata (cwd) and python/../testdata; a copy, not links: a model's external
    # data must lie in the model's own folder for onnxrt's loader
    shutil.copytree(src / "testdata", root / "testdata", symlinks=False)
    (root / "pytest.ini").write_text("[pytest]\n")
    return root


def run_mode(root: Path, mode: str, extra: list[str], python: str,
             files_run: tuple[str, ...] = FILES) -> dict[str, list[str]]:
    out = root / f"results_{mode}.json"
    files = [str(Path("python") / f) for f in files_run]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([python, "-c", _DRIVER, mode, str(out), *files, *extra],
                          cwd=root, env=env, capture_output=True, text=True)
    if not out.is_file():
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"the {mode} run produced no results (exit status {proc.returncode})")
    for line in proc.stderr.splitlines():
        if line.startswith("implementation:"):
            print(f"{mode}: {line}")
    return json.loads(out.read_text())


def _short(nodeid: str) -> str:
    return nodeid.replace("python/", "").replace(".py::", "::")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", type=Path, help="path of an onnxruntime source checkout")
    ap.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    ap.add_argument("--json", type=Path, default=None, help="write both result sets here")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--python", default=sys.executable)
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--set", choices=sorted(SETS), default="api",
                       help="which upstream files: api (default), ep, all")
    which.add_argument("--files", nargs="+", metavar="NAME.py",
                       help="upstream test files by name (onnxruntime/test/python/NAME.py)")
    args = ap.parse_args(argv)
    files = tuple(args.files) if args.files else SETS[args.set]
    root = _scratch(args.checkout, files)
    extra = ["-k", args.keyword] if args.keyword else []
    try:
        ref = run_mode(root, "onnxruntime", extra, args.python, files)
        ours = run_mode(root, "onnxrt", extra, args.python, files)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps({"onnxruntime": ref, "onnxrt": ours}, indent=1))
    for n, (outcome, reason) in ours.items():
        if n.startswith("collect:"):
            print(f"onnxrt: {n[8:]} failed to import: {reason}")
    ref = {n: r for n, r in ref.items() if not n.startswith("collect:")}
    counted = sorted(n for n, (outcome, _) in ref.items() if outcome == "passed")
    passing = [n for n in counted if ours.get(n, ("missing", ""))[0] == "passed"]
    not_counted = sorted(n for n in ref if n not in counted)
    print()
    print(f"{len(ref)} tests collected; {len(counted)} pass on onnxruntime "
          f"({len(not_counted)} fail or skip there and are not counted)")
    for fname in files:
        stem = fname[:-3]
        c = [n for n in counted if stem + ".py::" in n]
        p = [n for n in passing if stem + ".py::" in n]
        print(f"  {fname}: {len(p)}/{len(c)}")
    print(f"onnxrt: {len(passing)}/{len(counted)} of the tests that pass on onnxruntime pass")
    failing = [n for n in counted if n not in passing]
    if failing:
        print("\nfailing on onnxrt:")
        for n in failing:
            outcome, reason = ours.get(n, ("missing", "not collected"))
            print(f"  {_short(n)}: {outcome}: {reason}")
    print("\nnot counted (their outcome on onnxruntime):")
    for n in not_counted:
        outcome, reason = ref[n]
        print(f"  {_short(n)}: {outcome}: {reason}")
    extra_pass = [n for n in not_counted if ours.get(n, ("", ""))[0] == "passed"]
    if extra_pass:
        print(f"\n({len(extra_pass)} of those pass on onnxrt: "
              f"{', '.join(_short(n) for n in extra_pass)})")
    return 0 if not failing else 1


if __name__ == "__main__":
    sys.exit(main())
