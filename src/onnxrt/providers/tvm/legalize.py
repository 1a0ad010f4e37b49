"""Relax ops whose TVM lowering differs from the ONNX spec, lowered our way, so the nodes
stay on TVM with the spec's numbers.

Infinities: TVM's max and min reductions start from the lowest (highest) finite value of
the type, not from -inf (+inf): over values that are all -inf, ReduceMax gives -3.4e38
(float16: -65504) where the spec gives -inf, and ArgMax gives index -1 where the spec gives
0. The attention function's guard for a fully masked row (``ReduceMax(bias) == -inf``)
then never fires and the row stays NaN. Here they are the same reductions started from the
infinity (no cost).

float16: TVM accumulates float16 sums in float16 (a 256-term MatMul came out up to 1,800
times the backend suite's tolerance of 1e-3 relative off; ReduceSum 170, Conv 2,000,
LayerNormalization 70, Softmax 5), where
onnxruntime and the spec's reference compute in float32 and round once. Here every op that
sums over float16 values computes in float32 and rounds its result to float16 (the
frontend lowers Einsum itself, so rules.py declines float16 Einsum instead)."""

from __future__ import annotations

from typing import Any

__all__ = ["VERSION", "apply"]

# part of the compiled-module cache key: a module built with other lowerings is not reused
VERSION = "inf-identity-1,f16-wide-1"

_WIDE = ("relax.matmul", "relax.einsum", "relax.sum", "relax.mean", "relax.variance",
         "relax.std", "relax.prod", "relax.cumsum", "relax.nn.softmax", "relax.nn.log_softmax",
         "relax.nn.layer_norm", "relax.nn.group_norm", "relax.nn.instance_norm",
         "relax.nn.rms_norm", "relax.nn.conv1d", "relax.nn.conv2d", "relax.nn.conv3d",
         "relax.nn.conv1d_transpose", "relax.nn.conv2d_transpose", "relax.nn.conv3d_transpose",
         "relax.nn.avg_pool1d", "relax.nn.avg_pool2d", "relax.nn.avg_pool3d",
         "relax.nn.adaptive_avg_pool1d", "relax.nn.adaptive_avg_pool2d",
         "relax.nn.adaptive_avg_pool3d")


def _axes(x: Any, axis: Any) -> list[int]:
    n = len(x.shape)
    return list(range(n)) if axis is None else sorted(int(a) % n for a in axis)


def _reduce(x: Any, axes: list[int], keepdims: bool, combine: Any, init: Any,
            value: Any, name: str) -> Any:
    """``combine`` over ``axes`` of ``x``, starting from ``init``; ``value(index)`` gives
    what is reduced at an element (an (index, value) pair for arg reductions)."""
    from tvm import te

    rdom = [te.reduce_axis((0, x.shape[a]), name=f"k{a}") for a in axes]
    out_shape = [1 if a in axes else d for a, d in enumerate(x.shape)] if keepdims else \
        [d for a, d in enumerate(x.shape) if a not in axes]
    reducer = te.comm_reducer(combine, init, name=name)

    def body(*idx: Any) -> Any:
        full, it, k = [], iter(idx), iter(rdom)
        for a in range(len(x.shape)):
            if a in axes:
                if keepdims:
                    next(it)
                full.append(next(k))
            else:
                full.append(next(it))
        return reducer(value(full), axis=rdom)

    return te.compute(out_shape, body, name=name)


def _dtype(e: Any) -> str:
    """The element type of a Relax expression, "" when it has none (TVM gives it as a
    PrimType in some builds, as a data type in others)."""
    d = getattr(getattr(e, "ty", None), "dtype", None)
    d = getattr(d, "dtype", d)
    return "" if d is None else str(d)


def _extreme(dtype: str, sign: int) -> Any:
    from tvm import tirx as tir

    return tir.const(sign * float("inf"), dtype)


def _max_min(largest: bool) -> Any:
    def lower(bb: Any, call: Any) -> Any:
        from tvm import te

        x = call.args[0]
        dtype = _dtype(x)

        def f(t: Any, axis: Any, keepdims: bool) -> Any:
            pick = te.max if largest else te.min
            return _reduce(t, _axes(t, axis), bool(keepdims), lambda a, b: pick(a, b),
                           lambda dt: _extreme(dt, -1 if largest else 1),
                           lambda full: t(*full), "max_inf" if largest else "min_inf")

        if not dtype.startswith(("float", "bfloat")):
            return _default(bb, call)
        return bb.call_te(f, x, call.attrs.axis, call.attrs.keepdims,
                          primfunc_name_hint="max" if largest else "min")

    return lower


def _arg(largest: bool) -> Any:
    def lower(bb: Any, call: Any) -> Any:
        from tvm import tirx as tir

        x = call.args[0]
        dtype = _dtype(x)
        if not dtype.startswith(("float", "bfloat")):
            return _default(bb, call)
        idx_dtype = _dtype(call)

        def combine(lhs: Any, rhs: Any) -> Any:
            better = (rhs[1] > lhs[1]) if largest else (rhs[1] < lhs[1])
            # ties (and a row of infinities equal to the start value) go to the first index
            take = tir.Or(better, tir.And(rhs[1] == lhs[1], rhs[0] < lhs[0]))
            return (tir.Select(take, rhs[0], lhs[0]), tir.Select(take, rhs[1], lhs[1]))

        def init(i_dt: Any, v_dt: Any) -> Any:
            return (tir.max_value(i_dt), _extreme(v_dt, -1 if largest else 1))

        def f(t: Any, axis: Any, keepdims: bool) -> Any:
            axes = _axes(t, None if axis is None else [axis])

            def value(full: list[Any]) -> Any:
                # the index along the reduced axes, row-major (ONNX reduces one axis)
                flat = None
                for a in axes:
                    term = tir.Cast(idx_dtype, full[a])
                    flat = term if flat is None else \
                        flat * tir.Cast(idx_dtype, t.shape[a]) + term
                return (flat, t(*full))

            res = _reduce(t, axes, bool(keepdims), combine, init, value,
                          "argmax_inf" if largest else "argmin_inf")
            return res[0]

        return bb.call_te(f, x, call.attrs.axis, call.attrs.keepdims,
                          primfunc_name_hint="argmax" if largest else "argmin")

    return lower


def _default(bb: Any, call: Any) -> Any:
    import tvm

    return tvm.ir.Op.get(call.op.name).get_attr("FLegalize")(bb, call)


def _is_f16(e: Any) -> bool:
    return _dtype(e) == "float16"


def _wide(bb: Any, call: Any) -> Any:
    """The op on float32 copies of its float16 tensors, its result rounded to float16."""
    from tvm import relax

    def fields(e: Any) -> list[Any] | None:
        # Einsum's operands come as a tuple, written out or bound to a variable
        if isinstance(e, relax.Tuple):
            return list(e.fields)
        n = len(getattr(getattr(e, "ty", None), "fields", None) or ())
        return [bb.normalize(relax.TupleGetItem(e, i)) for i in range(n)] if n else None

    if not _is_f16(call) or not any(
            _is_f16(a) or any(_is_f16(f) for f in fields(a) or ()) for a in call.args):
        return _default(bb, call)

    def up(e: Any) -> Any:
        parts = fields(e)
        if parts is not None:
            return relax.Tuple([up(f) for f in parts])
        if not _is_f16(e):
            return e
        return bb.emit(_default(bb, bb.normalize(relax.op.astype(e, "float32"))))

    wide = bb.normalize(relax.Call(call.op, [up(a) for a in call.args], call.attrs,
                                   call.ty_args))
    out = bb.emit(_default(bb, wide))
    return _default(bb, bb.normalize(relax.op.astype(out, "float16")))


def apply(mod: Any) -> Any:
    """``mod`` with the ops above lowered as the spec has them; every other op is left to
    the build pipeline's own lowering."""
    import tvm
    from tvm import relax

    custom = {"relax.max": _max_min(True), "relax.min": _max_min(False),
              "relax.argmax": _arg(True), "relax.argmin": _arg(False)}
    names = set(tvm.ir.Op.list_op_names())
    custom.update({n: _wide for n in _WIDE if n in names})
    skip = [n for n in names if n not in custom]
    return relax.transform.LegalizeOps(customize_legalize_map=custom, skip_ops=skip,
                                       enable_warning=False)(mod)
