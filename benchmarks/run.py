"""The benchmark, the project's yardstick: onnxrt against onnxruntime (CPU provider, default
options, the same thread count) in one process, alternating runs on the same inputs.

    python benchmarks/run.py [--quick] [--only NAME,CATEGORY,...] [--skip ...] [--threads N]
                             [--json results.json] [--openvino] [--no-compile]

Cases come from every module ``benchmarks/cases_*.py``. Such a module defines

    CATEGORY = "cnn"                       # the category its cases are counted in
    def cases(quick: bool = False) -> list[dict]: ...

and each case is a dict:

    {"name": "resnet50_b1",                # unique over all modules
     "category": CATEGORY,
     "model": bytes,                       # the serialized ModelProto (or a zero-argument
                                           # callable returning it: built only when run)
     "feeds": {input name: np.ndarray},    # one run's inputs (or a callable returning them)
     "runs": 20}                           # optional: the number of timed runs

or, for a streaming case that runs several chunks and feeds state back, instead of
``feeds`` a key ``"stream": callable(run) -> None``, where ``run(feeds) -> list`` runs the
engine under test once (``session.run(None, feeds)``); one timed run is one call of
``stream``, and the outputs its last ``run`` returned are compared. ``quick`` asks for a
smoke-sized set (fewer, smaller cases). A module that fails to import (a benchmark-only
package missing: ``pip install -e ".[bench]"``) is reported and skipped.

Per case: the median latency of each engine, the ratio onnxrt / onnxruntime, session
creation of each, the peak memory onnxrt allocates during one run (tracemalloc), the
largest absolute difference of the outputs. Then the geometric mean of the ratios per
category and overall, the per-call overhead of a one-node model and the per-node overhead
of a 1,000-node chain (both reported apart, not in the means), and, in child processes
with an empty numba cache, the first session of a new machine (``--only first`` runs
just that; ``--no-compile`` skips it). The BLAS onnxrt's kernels call is printed first and
stored in the JSON.
"""

from __future__ import annotations

import os

# idle threads of one engine busy-wait and slow the other: BLAS threads sleep after 4 ms
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import argparse  # noqa: E402
import glob  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort_ref  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import onnxrt as ort  # noqa: E402

# seconds of timed runs per case (both engines together), and the bounds on their count
_BUDGET_S, _QUICK_BUDGET_S = 3.0, 0.5
_MIN_RUNS, _MAX_RUNS = 5, 300


def ref_session(data: bytes, threads: int) -> Any:
    so = ort_ref.SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return ort_ref.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def our_session(data: bytes, threads: int) -> Any:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def openvino_session(data: bytes, threads: int) -> Any:
    import warnings

    from onnxrt.providers.openvino import OpenVINOExecutionProvider

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ort.InferenceSession(data, providers=[
            OpenVINOExecutionProvider(num_of_threads=threads), "CPUExecutionProvider"])


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t


def _runner(sess: Any, case: dict[str, Any]) -> Callable[[], Any]:
    """One timed run of ``case`` on ``sess``: its outputs (the last chunk's for a stream)."""
    if "stream" in case:
        stream = case["stream"]

        def run() -> Any:
            last: list[Any] = [None]

            def one(feeds: dict[str, Any]) -> Any:
                last[0] = sess.run(None, feeds)
                return last[0]
            stream(one)
            return last[0]
        return run
    feeds = case["feeds"]
    return lambda: sess.run(None, feeds)


def _max_diff(a: Any, b: Any) -> float:
    """The largest absolute difference between two engines' outputs: numbers compared as
    float64, labels (strings) and other objects equal or not (inf), ZipMap's lists of
    dicts key by key."""
    err = 0.0
    for x, y in zip(a or [], b or []):
        if isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                return float("inf")
            if x and isinstance(x[0], dict):
                for dx, dy in zip(x, y):
                    if set(dx) != set(dy):
                        return float("inf")
                    for k in dx:
                        err = max(err, abs(float(dx[k]) - float(dy[k])))
                continue
        try:
            xa, ya = np.asarray(x), np.asarray(y)
        except (TypeError, ValueError):
            err = err if x == y else float("inf")
            continue
        if xa.shape != ya.shape:
            return float("inf")
        if xa.dtype.kind in "fiub" and ya.dtype.kind in "fiub":
            if xa.size:
                err = max(err, float(np.nanmax(np.abs(xa.astype(np.float64)
                                                      - ya.astype(np.float64)))))
        elif not np.array_equal(xa, ya):
            err = float("inf")
    return err


def bench(case: dict[str, Any], threads: int, quick: bool = False,
          openvino: bool = False) -> dict[str, Any]:
    data = case["model"]
    ours, c_ours = timed(lambda: our_session(data, threads))
    ref, c_ref = timed(lambda: ref_session(data, threads))
    engines: list[tuple[str, Callable[[], Any], list[float]]] = [
        ("ours", _runner(ours, case), []), ("ref", _runner(ref, case), [])]
    c_ov = 0.0
    if openvino:
        ov, c_ov = timed(lambda: openvino_session(data, threads))
        engines.append(("ov", _runner(ov, case), []))
    # warm-up (the first run pays for caches and lazy set-up); its time sizes the run count
    spent = 0.0
    for _ in range(1 if quick else 2):
        for _tag, run, _times in engines:
            spent += timed(run)[1]
    per = spent / (1 if quick else 2)
    runs = case.get("runs") or int(min(_MAX_RUNS, max(
        (3 if quick else _MIN_RUNS), (_QUICK_BUDGET_S if quick else _BUDGET_S) / max(per, 1e-6))))
    outs: dict[str, Any] = {}
    for k in range(runs):
        # rotate which engine runs first: the first after another engine pays for its caches
        for tag, run, times in engines[k % len(engines):] + engines[:k % len(engines)]:
            res, t = timed(run)
            times.append(t)
            outs[tag] = res
    tracemalloc.start()
    engines[0][1]()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    mo, mr = statistics.median(engines[0][2]), statistics.median(engines[1][2])
    row = {"model": case["name"], "category": case["category"], "onnxrt_ms": mo * 1e3,
           "onnxruntime_ms": mr * 1e3, "ratio": mo / mr, "create_onnxrt_ms": c_ours * 1e3,
           "create_onnxruntime_ms": c_ref * 1e3, "create_ratio": c_ours / c_ref,
           "peak_mb": peak / 2**20, "max_abs_diff": _max_diff(outs["ours"], outs["ref"]),
           "runs": runs}
    if openvino:
        mv = statistics.median(engines[2][2])
        row.update(openvino_ms=mv * 1e3, openvino_ratio=mv / mr, create_openvino_ms=c_ov * 1e3)
    return row


# -- overheads ---------------------------------------------------------------------------------

def _chain_model(n: int) -> bytes:
    nodes = [onnx.helper.make_node("Neg", [f"v{i}"], [f"v{i + 1}"]) for i in range(n)]
    g = onnx.helper.make_graph(
        nodes, "chain", [onnx.helper.make_tensor_value_info("v0", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info(f"v{n}", onnx.TensorProto.FLOAT, [1])])
    return onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)],
                                  ir_version=8).SerializeToString()


def overheads(threads: int, quick: bool) -> list[dict[str, Any]]:
    """Per call: one Neg on a one-element tensor, timed over many calls (what a user's
    run() costs beyond its kernels); per node: a chain of 1,000 of them."""
    feeds = {"v0": np.ones(1, np.float32)}
    out = []
    for n, calls in ((1, 200), (1000, 1)):
        data = _chain_model(n)
        sessions = [our_session(data, threads), ref_session(data, threads)]
        times: list[list[float]] = [[], []]
        for k in range(20 if quick else 60):
            for j in ((0, 1) if k % 2 == 0 else (1, 0)):
                s = sessions[j]
                t = time.perf_counter()
                for _ in range(calls):
                    s.run(None, feeds)
                times[j].append((time.perf_counter() - t) / calls)
        mo, mr = statistics.median(times[0]), statistics.median(times[1])
        out.append({"model": f"chain{n}" if n > 1 else "one_node", "onnxrt_us": mo * 1e6,
                    "onnxruntime_us": mr * 1e6, "ratio": mo / mr,
                    "onnxrt_us_per_node": mo * 1e6 / n, "onnxruntime_us_per_node": mr * 1e6 / n})
    return out


# -- the first session on a new machine --------------------------------------------------------

# a child process: the session of one model, timed apart from the imports; for onnxrt also
# how long until its compiled kernels are in place (they compile in the background)
_FIRST_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
engine, model = sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
if engine == "onnxrt":
    import onnxrt as ort
else:
    import onnxruntime as ort
import first_session_models as fm
t1 = time.perf_counter()
data, feeds = fm.build(model)
t2 = time.perf_counter()
s = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
t3 = time.perf_counter()
s.run(None, feeds)
t4 = time.perf_counter()
ready = t3
if engine == "onnxrt":
    from onnxrt.providers.cpu.nn import jit
    if jit.wait_compiled(900):
        ready = time.perf_counter()
print("RESULT", t1 - t0, t3 - t2, t4 - t3, ready - t2)
"""


def first_session(models: list[str]) -> list[dict[str, Any]]:
    """Per model: session creation, first run and the time until onnxrt's compiled kernels
    are in place, in a fresh process whose numba cache is empty (each model in its own empty
    cache: the first session a new user makes), then once more with that cache filled; and
    onnxruntime's in a fresh process."""
    import subprocess
    import tempfile
    rows = []

    def child(engine: str, model: str, env: dict[str, str]) -> list[float]:
        r = subprocess.run([sys.executable, "-c", _FIRST_CHILD, HERE, engine, model], env=env,
                           capture_output=True, text=True, timeout=900)
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
        if r.returncode != 0 or not line:
            raise RuntimeError(f"{engine} {model}: {r.stderr.strip().splitlines()[-1:]}")
        return [float(v) for v in line[-1].split()[1:]]

    # Python's own bytecode cache is allowed (this machine sets PYTHONDONTWRITEBYTECODE,
    # which made every process compile the ~80 kernel modules a first session imports,
    # ~0.35 s; an installed package has its .pyc files): written by a first child with
    # the compiled kernels off
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    child("onnxrt", models[0], dict(base_env, ONNXRT_JIT="0"))
    for model in models:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(base_env, NUMBA_CACHE_DIR=cache, ONNXRT_CACHE_DIR=cache)
            env.pop("ONNXRT_JIT", None)
            cold = child("onnxrt", model, env)
            warm = child("onnxrt", model, env)
        ref = child("onnxruntime", model, base_env)
        rows.append({"model": model, "import_s": cold[0], "create_cold_s": cold[1],
                     "first_run_cold_s": cold[2], "compiled_cold_s": cold[3],
                     "create_warm_s": warm[1], "first_run_warm_s": warm[2],
                     "compiled_warm_s": warm[3], "ort_import_s": ref[0],
                     "ort_create_s": ref[1], "ort_first_run_s": ref[2],
                     "create_ratio_cold": cold[1] / ref[1]})
    return rows


# -- collecting the cases ----------------------------------------------------------------------

def collect(quick: bool, where: str = HERE) -> tuple[list[dict[str, Any]], list[str]]:
    """Every case of every ``cases_*.py`` module in ``where``, and a line per module that
    failed."""
    cases, failed = [], []
    if where not in sys.path:
        sys.path.insert(0, where)
    for path in sorted(glob.glob(os.path.join(where, "cases_*.py"))):
        mod_name = os.path.splitext(os.path.basename(path))[0]
        try:
            spec = importlib.util.spec_from_file_location(mod_name, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            got = mod.cases(quick=quick)
        except Exception as e:      # a missing benchmark-only package: said, not fatal
            failed.append(f"{mod_name}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
            continue
        for c in got:
            c.setdefault("category", getattr(mod, "CATEGORY", mod_name[6:]))
            cases.append(c)
    names = [c["name"] for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SystemExit(f"case names used twice: {sorted(dup)}")
    return cases, failed


def _resolve(case: dict[str, Any]) -> dict[str, Any]:
    """The case with a lazily built model and feeds made."""
    c = dict(case)
    if callable(c["model"]):
        c["model"] = c["model"]()
    if isinstance(c["model"], onnx.ModelProto):
        c["model"] = c["model"].SerializeToString()
    if callable(c.get("feeds")):
        c["feeds"] = c["feeds"]()
    return c


def geomean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values)))) if values else float("nan")


def _selected(case: dict[str, Any], only: set[str], skip: set[str]) -> bool:
    keys = {case["name"], case["category"]}
    return (not only or bool(keys & only)) and not keys & skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smoke run: small cases, few runs")
    p.add_argument("--only", default="", help="comma-separated case names or categories "
                   "(also 'overhead', 'first')")
    p.add_argument("--skip", default="", help="comma-separated case names or categories")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", default="benchmark_results.json")
    p.add_argument("--openvino", action="store_true",
                   help="add a column: onnxrt with the OpenVINO provider")
    p.add_argument("--no-compile", action="store_true",
                   help="skip the first-session measurement in child processes")
    p.add_argument("--rss", action="store_true",
                   help="per case, peak RSS and creation of each engine in a fresh child "
                   "process (memory.py)")
    p.add_argument("--cases-dir", default=HERE, help="where the cases_*.py modules are")
    p.add_argument("--first-models", default="resnet50,mobilenet_hs,bert_layer",
                   help="models of the first-session measurement (first_session_models.py)")
    args = p.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    from onnxrt.providers.cpu import blas
    lib = blas.name(np.float32) or "none"
    why = blas.reason() if hasattr(blas, "reason") else "ONNXRT_BLAS or installed"
    print(f"onnxrt's compiled kernels call {lib} ({why}), {args.threads} threads", flush=True)
    try:
        from onnxrt.framework import warmup
    except ImportError:     # an older onnxrt (a before run): warmup lived in execute/
        try:
            from onnxrt.framework import warmup
        except ImportError:     # from before the background compile
            warmup = None
    t = time.perf_counter()
    # the kernels compile in the background on a new machine: time the compiled ones
    if warmup is None:
        pass
    elif warmup.status() not in ("ready", "off"):
        print("waiting for onnxrt's kernels to compile (first use on this machine)...",
              flush=True)
    if warmup is not None and not warmup.wait(1800):
        print(f"compiled kernels unavailable ({warmup.status()}): the NumPy kernels run")
    elif time.perf_counter() - t > 1:
        print(f"compiled in {time.perf_counter() - t:.1f} s")
    cases, failed = collect(args.quick, args.cases_dir)
    for f in failed:
        print(f"module skipped: {f}")
    rows: list[dict[str, Any]] = []
    head = (f"{'case':<24} {'category':<11} {'onnxrt ms':>10} {'ort ms':>9} {'ratio':>6} "
            f"{'create':>8} {'ort create':>10} {'peak MB':>8} {'max|diff|':>10}"
            + (f" {'OV ms':>9} {'OV ratio':>8}" if args.openvino else ""))
    print(head, flush=True)
    for case in cases:
        if not _selected(case, only, skip):
            continue
        try:
            c = _resolve(case)
            r = bench(c, args.threads, args.quick, args.openvino)
            if args.rss:
                import memory
                r.update(memory.both(c["model"], c.get("feeds"), args.threads))
        except Exception as e:  # a case one engine cannot run is reported, not fatal
            msg = f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
            print(f"{case['name']:<24} {case['category']:<11} failed: {msg}", flush=True)
            rows.append({"model": case["name"], "category": case["category"], "error": msg})
            continue
        rows.append(r)
        print(f"{r['model']:<24} {r['category']:<11} {r['onnxrt_ms']:>10.3f} "
              f"{r['onnxruntime_ms']:>9.3f} {r['ratio']:>6.2f} {r['create_onnxrt_ms']:>8.0f} "
              f"{r['create_onnxruntime_ms']:>10.0f} {r['peak_mb']:>8.1f} "
              f"{r['max_abs_diff']:>10.2e}"
              + (f" {r['openvino_ms']:>9.2f} {r['openvino_ratio']:>8.2f}"
                 if "openvino_ms" in r else ""), flush=True)
        if "rss_ratio" in r:
            print(f"{'':<24} peak RSS {r['rss_onnxrt_mb']:.0f} MB vs {r['rss_onnxruntime_mb']:.0f}"
                  f" MB ({r['rss_ratio']:.2f}x); creation in a fresh process "
                  f"{r['create_child_onnxrt_s']:.2f} s vs {r['create_child_onnxruntime_s']:.2f} s"
                  f" ({r['create_child_ratio']:.2f}x)", flush=True)
    ok = [r for r in rows if "ratio" in r]
    cats: dict[str, list[float]] = {}
    for r in ok:
        cats.setdefault(r["category"], []).append(r["ratio"])
    per_cat = {c: geomean(v) for c, v in cats.items()}
    overall = geomean([r["ratio"] for r in ok])
    if ok:
        print("\ngeometric mean of onnxrt/onnxruntime time ratios:")
        for c, g in per_cat.items():
            worst = max((r for r in ok if r["category"] == c), key=lambda r: r["ratio"])
            print(f"  {c:<12} {g:5.2f} over {len(cats[c]):>2} cases; worst {worst['model']} "
                  f"{worst['ratio']:.2f}")
        worst = max(ok, key=lambda r: r["ratio"])
        print(f"  {'overall':<12} {overall:5.2f} over {len(ok):>2} cases; worst "
              f"{worst['model']} {worst['ratio']:.2f}")
        print(f"  session creation: {geomean([r['create_ratio'] for r in ok]):.2f}")
        ovr = [r["openvino_ratio"] for r in ok if "openvino_ratio" in r]
        if ovr:
            print(f"  onnxrt+OpenVINO: {geomean(ovr):.2f} over {len(ovr)} cases")
    over = None
    if not only or "overhead" in only:
        over = overheads(args.threads, args.quick)
        one, chain = over
        print(f"per-call overhead, one-node model: onnxrt {one['onnxrt_us']:.1f} us, "
              f"onnxruntime {one['onnxruntime_us']:.1f} us, ratio {one['ratio']:.2f}; "
              f"per node (1,000-node chain): {chain['onnxrt_us_per_node']:.2f} / "
              f"{chain['onnxruntime_us_per_node']:.2f} us", flush=True)
    first = None
    if (not only and not args.no_compile) or "first" in only:
        first = first_session([m for m in args.first_models.split(",") if m])
        print("first session in a fresh process (numba cache empty -> filled; onnxruntime):")
        for f in first:
            print(f"  {f['model']:<14} create {f['create_cold_s']:.2f} s (first run "
                  f"{f['first_run_cold_s']:.2f} s, compiled kernels in place after "
                  f"{f['compiled_cold_s']:.1f} s) -> {f['create_warm_s']:.2f} s; onnxruntime "
                  f"{f['ort_create_s']:.2f} s (first run {f['ort_first_run_s']:.2f} s); "
                  f"ratio {f['create_ratio_cold']:.1f}; import onnxrt {f['import_s']:.2f} s, "
                  f"onnxruntime {f['ort_import_s']:.2f} s", flush=True)
    result = {"rows": rows, "categories": per_cat, "geomean_ratio": overall,
              "overhead": over, "first_session": first, "threads": args.threads,
              "quick": args.quick, "blas": lib, "skipped_modules": failed}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"written: {args.json}")
    return result


if __name__ == "__main__":
    main()
