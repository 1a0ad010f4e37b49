"""What RNN, GRU and LSTM share: attributes, activations, layouts, the time loop.

The input projection of every timestep (and both directions) is one matmul (weights of
both directions side by side, laid out once per session when they are constants); the
time loop then runs whole in one compiled call (rnn/compiled.py: gates fused, directions
and blocks of batch rows over the session's threads). Without numba (or ONNXRT_JIT=0) the
NumPy loop below runs instead: only the recurrence ``h @ R^T`` per step, for both
directions at once as a stacked matmul; reverse directions and ``sequence_lens`` handled by
gathering the projected inputs into processing order once.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from onnxrt.framework.parallel import SERIAL, ThreadPool
from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.cpu.nn.matmul import matmul
from onnxrt.providers.cpu.rnn import compiled

__all__ = ["RecurrentKernel", "lstm_gates", "sigmoid"]

Act = Callable[[np.ndarray], np.ndarray]


def sigmoid(x: np.ndarray) -> np.ndarray:
    # the tanh form never overflows, unlike 1 / (1 + exp(-x)) for large negative x
    y = np.multiply(x, 0.5)
    np.tanh(y, out=y)
    y *= 0.5
    y += 0.5
    return y


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(x.dtype.type(0), x)


def _elu(alpha: float) -> Act:
    def f(x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.where(x >= 0, x, alpha * np.expm1(x)).astype(x.dtype, copy=False)
    return f


# name -> (factory(alpha, beta), default alpha, default beta, uses alpha, uses beta)
_ACTS: dict[str, tuple[Callable[[float, float], Act], float, float, bool, bool]] = {
    "relu": (lambda a, b: lambda x: np.maximum(x, 0, dtype=x.dtype), 0.0, 0.0, False, False),
    "tanh": (lambda a, b: np.tanh, 0.0, 0.0, False, False),
    "sigmoid": (lambda a, b: sigmoid, 0.0, 0.0, False, False),
    "affine": (lambda a, b: lambda x: x * x.dtype.type(a) + x.dtype.type(b), 1.0, 0.0,
               True, True),
    "leakyrelu": (lambda a, b: lambda x: np.where(x >= 0, x, x * x.dtype.type(a)),
                  0.01, 0.0, True, False),
    "thresholdedrelu": (lambda a, b: lambda x: np.where(x > a, x, x.dtype.type(0)),
                        1.0, 0.0, True, False),
    "scaledtanh": (lambda a, b: lambda x: np.tanh(x * x.dtype.type(b)) * x.dtype.type(a),
                   1.0, 1.0, True, True),
    "hardsigmoid": (lambda a, b: lambda x: np.clip(x * x.dtype.type(a) + x.dtype.type(b),
                                                   0, 1).astype(x.dtype, copy=False),
                    0.2, 0.5, True, True),
    "elu": (lambda a, b: _elu(a), 1.0, 0.0, True, False),
    "softsign": (lambda a, b: lambda x: x / (1 + np.abs(x)), 0.0, 0.0, False, False),
    "softplus": (lambda a, b: _softplus, 0.0, 0.0, False, False),
}


def _parse_activations(names: list[str], alphas: list[float] | None,
                       betas: list[float] | None) -> list[tuple[Any, Act]]:
    """(key, callable) for ``names``; alpha/beta values are consumed in order by the
    functions that take them (as onnxruntime does), the rest use their ONNX defaults."""
    ai = iter(alphas or ())
    bi = iter(betas or ())
    out = []
    for name in names:
        key = name.lower()
        if key not in _ACTS:
            raise ValueError(f"unsupported activation {name!r}; supported: "
                             f"{sorted(_ACTS)}")
        make, a, b, use_a, use_b = _ACTS[key]
        if use_a:
            a = next(ai, a)
        if use_b:
            b = next(bi, b)
        out.append(((key, float(a), float(b)), make(float(a), float(b))))
    return out


def lstm_gates(g: np.ndarray, c: np.ndarray, peep: np.ndarray | None, acts: list[Act],
               input_forget: bool) -> tuple[np.ndarray, np.ndarray]:
    """One LSTM step from its (B, 4H) pre-activations in ONNX's i, o, f, c gate order (clip
    already applied): the new hidden and cell states. For the contrib LSTMs that run their
    own NumPy time loop (AttnLSTM, DynamicQuantizeLSTM); ``acts`` is one direction's f, g,
    h activations."""
    h = g.shape[1] // 4
    gi, go, gf, gc = g[:, :h], g[:, h:2 * h], g[:, 2 * h:3 * h], g[:, 3 * h:]
    fa, ga, ha = acts
    if peep is not None:
        gi = gi + peep[:h] * c
        gf = gf + peep[2 * h:] * c
    i = fa(gi)
    f = 1 - i if input_forget else fa(gf)
    c_new = f * c + i * ga(gc)
    if peep is not None:
        go = go + peep[h:2 * h] * c_new
    return fa(go) * ha(c_new), c_new


def compute_dtype(dt: np.dtype) -> np.dtype:
    # half-precision types accumulate in float32; float64 stays float64
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


class RecurrentKernel:
    """Base of the RNN/GRU/LSTM kernels. Subclasses set the class constants and ``cell``."""

    n_gates = 1                         # gate blocks stacked in W and R
    default_acts: tuple[str, ...] = ()  # activation names for one direction
    has_cell = False                    # LSTM: a cell state next to the hidden state
    kind = compiled.KIND_RNN            # which cell the compiled loop runs

    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        direction = a.get("direction") or "forward"
        if direction == "foward":  # the default of the opset-1 schemas, misspelt in the spec
            direction = "forward"
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ValueError(f"direction must be forward, reverse or bidirectional, "
                             f"got {direction!r}")
        self.reverse = {"forward": (False,), "reverse": (True,),
                        "bidirectional": (False, True)}[direction]
        self.num_dir = len(self.reverse)
        self._rev = np.array(self.reverse, np.int64)
        self.hidden_size = a.get("hidden_size")
        self.layout = int(a.get("layout", 0) or 0)
        clip = a.get("clip")
        self.clip = None if clip is None else float(clip)
        names = list(a.get("activations") or self.default_acts)
        k = len(self.default_acts)
        if len(names) == k and self.num_dir == 2:
            names = names * 2  # one set given for both directions
        elif len(names) > k * self.num_dir:
            names = names[:k * self.num_dir]  # RNN's schema default lists two, for 2 dirs
        if len(names) != k * self.num_dir:
            raise ValueError(f"{node.op_type} with direction {direction} needs "
                             f"{k * self.num_dir} activations, got {names}")
        fns = _parse_activations(names, a.get("activation_alpha"), a.get("activation_beta"))
        # the same functions as codes for the compiled loop: (direction, f/g/h)
        self.act_codes = np.zeros((self.num_dir, 3), np.int64)
        self.act_alpha = np.zeros((self.num_dir, 3))
        self.act_beta = np.zeros((self.num_dir, 3))
        for i, ((key, al, be), _) in enumerate(fns):
            self.act_codes[i // k, i % k] = compiled.ACT_CODES[key]
            self.act_alpha[i // k, i % k] = al
            self.act_beta[i // k, i % k] = be
        # per gate function: one callable when every direction uses the same function and
        # parameters (then it
        # runs once on the stacked directions), else one per direction
        self.acts: list[Any] = []
        for g in range(k):
            per_dir = [fns[d * k + g] for d in range(self.num_dir)]
            if len({key for key, _ in per_dir}) == 1:
                self.acts.append(per_dir[0][1])
            else:
                self.acts.append([fn for _, fn in per_dir])
        self.want_y = node.output_present(0)
        const = node.constant_inputs
        self._packed = None
        if 1 in const and 2 in const and (not node.input_present(3) or 3 in const):
            w = const[1]
            self._packed = self.pack(w, const[2], const.get(3), compute_dtype(w.dtype))
        self._loop = compiled.kernel()     # None: the NumPy step loop below runs
        self._cat = None
        if self._loop is not None and self._packed is not None:
            self._cat = self._compiled_weights(self._packed)
        self._clip_value = float(self.clip) if self.clip is not None else 0.0
        self._lbr = bool(getattr(self, "linear_before_reset", False))
        self._input_forget = bool(getattr(self, "input_forget", False))
        # ``lens`` of full-length batches by (batch, steps), made once: a streaming model
        # calls its node with the same shapes every chunk
        self._full_lens: dict[tuple[int, int], np.ndarray] = {}

    # -- helpers for subclasses --------------------------------------------------------
    def act(self, g: int, x: np.ndarray, clip: bool = True) -> np.ndarray:
        """Apply gate function ``g`` to ``x`` shaped (num_dir, batch, n), clipping ``x``
        in place first when the node has ``clip``."""
        if clip and self.clip is not None:
            np.clip(x, -self.clip, self.clip, out=x)
        fn = self.acts[g]
        if not isinstance(fn, list):
            return fn(x)
        return np.stack([f(x[d]) for d, f in enumerate(fn)])

    def pack(self, W: np.ndarray, R: np.ndarray, B: np.ndarray | None,
             cdt: np.dtype) -> tuple[Any, ...]:
        """Weights transposed for ``x @ W^T`` and the biases that fold into the input
        projection (W's bias always, R's where the equations allow it)."""
        D = self.num_dir
        if W.shape[0] != D or R.shape[0] != D:
            raise ValueError(f"W and R must have num_directions={D} as first dimension, "
                             f"got W {W.shape}, R {R.shape}")
        H = R.shape[-1]
        if self.hidden_size is not None and int(self.hidden_size) != H:
            raise ValueError(f"hidden_size={self.hidden_size} but R has shape {R.shape}")
        G = self.n_gates
        if W.shape[1] != G * H or R.shape[1] != G * H:
            raise ValueError(f"W and R must have {G}*hidden_size={G * H} rows, got W "
                             f"{W.shape}, R {R.shape}")
        Wt = np.ascontiguousarray(W.astype(cdt, copy=False).transpose(0, 2, 1))
        Rt = np.ascontiguousarray(R.astype(cdt, copy=False).transpose(0, 2, 1))
        if B is None:
            wb = np.zeros((D, G * H), cdt)
            rb = np.zeros((D, G * H), cdt)
        else:
            B = B.astype(cdt, copy=False)
            if B.shape != (D, 2 * G * H):
                raise ValueError(f"B must have shape {(D, 2 * G * H)}, got {B.shape}")
            wb, rb = B[:, :G * H], B[:, G * H:]
        return self.pack_extra(Wt, Rt, wb, rb, H)

    def pack_extra(self, Wt: np.ndarray, Rt: np.ndarray, wb: np.ndarray, rb: np.ndarray,
                   H: int) -> tuple[Any, ...]:
        """Default: both biases fold into the input projection."""
        return (Wt, Rt, (wb + rb)[:, None, :], H)

    def recurrent_bias(self, packed: tuple[Any, ...]) -> np.ndarray | None:
        """R's bias of GRU's h gate, (D, 1, H), which cannot fold into the projection."""
        return None

    def cell(self, gx: np.ndarray, h: np.ndarray, c: np.ndarray | None,
             packed: tuple[Any, ...], extra: Any) -> tuple[np.ndarray, np.ndarray | None]:
        raise NotImplementedError

    def prepare_extra(self, extra_inputs: tuple[Any, ...], D: int, B: int, H: int,
                      cdt: np.dtype) -> Any:
        return None

    # -- the run -----------------------------------------------------------------------
    def run(self, X: np.ndarray, W: np.ndarray, R: np.ndarray, B: np.ndarray | None,
            seq_lens: np.ndarray | None, init_h: np.ndarray | None,
            init_c: np.ndarray | None = None, *extra_inputs: Any,
            pool: ThreadPool = SERIAL) -> tuple[Any, ...]:
        """The sequence; ``pool``: the session's threads (the run context's), which split
        the compiled time loop's batch blocks."""
        out_dt = X.dtype
        cdt = compute_dtype(out_dt)
        packed = self._packed
        if packed is None or packed[0].dtype != cdt:
            packed = self.pack(W, R, B, cdt)
        Wt, H = packed[0], packed[3]
        D = self.num_dir
        if X.ndim != 3:
            raise ValueError(f"X must be 3-D, got shape {X.shape}")
        if self._loop is not None:
            return self._run_compiled(X, packed, seq_lens, init_h, init_c, extra_inputs,
                                      cdt, out_dt, pool)
        if self.layout:
            X = X.transpose(1, 0, 2)
        T, Bn, I = X.shape
        if Wt.shape[1] != I:
            raise ValueError(f"X has input_size {I} but W has {Wt.shape[1]}")
        X = X.astype(cdt, copy=False)

        h0 = self._state(init_h, D, Bn, H, cdt, "initial_h")
        c0 = self._state(init_c, D, Bn, H, cdt, "initial_c") if self.has_cell else None
        extra = self.prepare_extra(extra_inputs, D, Bn, H, cdt)

        lens = None
        if seq_lens is not None:
            lens = np.asarray(seq_lens).astype(np.int64).reshape(-1)
            if lens.shape[0] != Bn:
                raise ValueError(f"sequence_lens has {lens.shape[0]} entries for batch {Bn}")
            if lens.size and (lens.min() < 0 or lens.max() > T):
                raise ValueError(f"sequence_lens must lie in [0, {T}], got {lens.tolist()}")
            if lens.size == 0 or lens.min() == T:
                lens = None  # every sequence is full: no masking needed

        # input projection of all steps and directions: (D, T, B, G*H)
        gx = np.matmul(X.reshape(T * Bn, I)[None], Wt)
        gx += packed[2]
        gx = gx.reshape(D, T, Bn, Wt.shape[2])
        steps = T
        idx = mask = None
        if lens is None:
            for d, rev in enumerate(self.reverse):
                if rev:
                    gx[d] = gx[d, ::-1].copy()
        else:
            steps = int(lens.max())
            s = np.arange(T)[:, None]
            valid = s < lens[None, :]                                      # (T, B)
            idx = np.empty((D, T, Bn), np.int64)
            cols = np.arange(Bn)
            for d, rev in enumerate(self.reverse):
                idx[d] = np.where(valid, lens[None, :] - 1 - s, s) if rev else s
                if rev:
                    gx[d] = gx[d][idx[d], cols]
            mask = valid[:, None, :, None]                                 # (T, 1, B, 1)

        h, c = h0, c0
        hs = np.zeros((T, D, Bn, H), cdt) if self.want_y else None
        for s in range(steps):
            hn, cn = self.cell(gx[:, s], h, c, packed, extra)
            if mask is not None:
                m = mask[s]
                hn = np.where(m, hn, h)
                if cn is not None:
                    cn = np.where(m, cn, c)
            h, c = hn, cn
            if hs is not None:
                hs[s] = h

        Y = None
        if hs is not None:
            if mask is not None:
                hs *= mask
            Y = hs
            if any(self.reverse):
                Y = np.empty_like(hs)
                for d, rev in enumerate(self.reverse):
                    if not rev:
                        Y[:, d] = hs[:, d]
                    elif idx is None:
                        Y[:, d] = hs[::-1, d]
                    else:
                        Y[idx[d], d, np.arange(Bn)] = hs[:, d]
            if self.layout:
                Y = Y.transpose(2, 0, 1, 3)
            Y = Y.astype(out_dt, copy=False)
        if lens is not None and (lens == 0).any():
            # a row of length 0 has no last state: zeros, as onnxruntime writes
            h = np.where((lens == 0)[None, :, None], 0, h).astype(cdt, copy=False)
            if c is not None:
                c = np.where((lens == 0)[None, :, None], 0, c).astype(cdt, copy=False)
        outs = [Y, self._out_state(h, out_dt)]
        if self.has_cell:
            outs.append(self._out_state(c, out_dt))
        return tuple(outs)

    def _run_compiled(self, X: np.ndarray, packed: tuple[Any, ...], seq_lens: Any,
                      init_h: Any, init_c: Any, extra_inputs: tuple[Any, ...],
                      cdt: np.dtype, out_dt: np.dtype, pool: ThreadPool) -> tuple[Any, ...]:
        """The whole time loop in one compiled call (rnn/compiled.py)."""
        loop, project = self._loop
        Rt, H = packed[1], packed[3]
        D = self.num_dir
        if self.layout:
            Bn, T, I = X.shape
        else:
            T, Bn, I = X.shape
        w_cat, b_cat, rbh, zeros3 = (self._cat if packed is self._packed
                                     else self._compiled_weights(packed))
        if w_cat.shape[0] != I:
            raise ValueError(f"X has input_size {I} but W has {w_cat.shape[0]}")
        h0 = self._state(init_h, D, Bn, H, cdt, "initial_h", copy=False)
        c0 = self._state(init_c, D, Bn, H, cdt, "initial_c", copy=False) if self.has_cell \
            else h0
        if seq_lens is None:
            lens = self._full_lens.get((Bn, T))
            if lens is None:
                lens = np.full(Bn, T, np.int64)     # the loop only reads it
                if len(self._full_lens) < 16:
                    self._full_lens[(Bn, T)] = lens
        else:
            lens = np.ascontiguousarray(np.asarray(seq_lens).reshape(-1), dtype=np.int64)
            if lens.shape[0] != Bn:
                raise ValueError(f"sequence_lens has {lens.shape[0]} entries for batch {Bn}")
            if lens.size and (lens.min() < 0 or lens.max() > T):
                raise ValueError(f"sequence_lens must lie in [0, {T}], got {lens.tolist()}")
        peep = extra_inputs[0] if self.has_cell and extra_inputs else None
        if peep is not None:
            if peep.shape != (D, 3 * H):
                raise ValueError(f"P must have shape {(D, 3 * H)}, got {peep.shape}")
            peep = np.ascontiguousarray(peep, dtype=cdt)
        GH = Rt.shape[2]
        # the input projection of every step and direction: one product (each row holds
        # every direction's gates), biases folded
        x2 = np.ascontiguousarray(X.reshape(-1, I), dtype=cdt)
        if x2.shape[0] * I * D * GH <= compiled.PROJECT_MAX_WORK:
            gx = np.empty((x2.shape[0], D * GH), cdt)
            project(x2, w_cat, b_cat, gx)
        else:
            gx = matmul(x2, w_cat, pool)
            gx += b_cat
        # the loop writes every step of every row when all rows run the full length; rows
        # that stop early leave zeros behind
        y = (np.empty if seq_lens is None else np.zeros)(T * D * Bn * H if self.want_y else 1,
                                                         cdt)
        yh = np.empty((D, Bn, H), cdt)
        yc = np.empty((D, Bn, H), cdt) if self.has_cell else yh
        work = T * Bn * D * H * GH
        threads = pool.threads if work >= compiled.PAR_MIN_WORK else 1
        blocks = max(1, min(Bn, -(-threads // D)))
        bs = max(1, -(-Bn // blocks))
        items = D * (-(-Bn // bs)) if Bn else 0
        args = (self.kind, gx.reshape(-1), Rt, rbh, zeros3 if peep is None else peep, h0, c0,
                y, yh, yc, lens, self._rev, self.act_codes, self.act_alpha, self.act_beta,
                self._clip_value, self._lbr, self._input_forget, peep is not None,
                self.want_y, bool(self.layout), cdt == np.float32, bs)
        if threads > 1 and items > 1:
            compiled.run_items(loop, args, items, True, pool)
        elif items:
            loop(*args, 0, items)   # one call on this thread: no pool hand-off to pay for
        Y = None
        if self.want_y:
            Y = y.reshape((Bn, T, D, H) if self.layout else (T, D, Bn, H))
            Y = Y.astype(out_dt, copy=False)
        outs = [Y, self._out_state(yh, out_dt)]
        if self.has_cell:
            outs.append(self._out_state(yc, out_dt))
        return tuple(outs)

    def _compiled_weights(self, packed: tuple[Any, ...]) -> tuple[np.ndarray, ...]:
        """What the compiled loop reads besides Rt: W^T of every direction side by side
        (I, D * G*H), their folded biases, GRU's recurrent h-gate bias (D, H) (zeros for
        the others) and zeros in place of absent peepholes (D, 3H)."""
        wt, bias, H = packed[0], packed[2], packed[3]
        d, i, gh = wt.shape
        rbh = self.recurrent_bias(packed)
        rbh = np.zeros((d, H), wt.dtype) if rbh is None else np.ascontiguousarray(
            rbh.reshape(d, H))
        return (np.ascontiguousarray(wt.transpose(1, 0, 2).reshape(i, d * gh)),
                np.ascontiguousarray(bias.reshape(d * gh)), rbh,
                np.zeros((d, 3 * H), wt.dtype))

    def _state(self, v: np.ndarray | None, D: int, Bn: int, H: int, cdt: np.dtype,
               what: str, copy: bool = True) -> np.ndarray:
        if v is None:
            return np.zeros((D, Bn, H), cdt)
        if self.layout:
            v = v.transpose(1, 0, 2)
        if v.shape != (D, Bn, H):
            raise ValueError(f"{what} must have shape {(D, Bn, H)} (layout {self.layout}), "
                             f"got {v.shape}")
        if not copy:    # the compiled loop only reads it
            return np.ascontiguousarray(v, dtype=cdt)
        return v.astype(cdt)  # a copy: the loop never writes into the caller's array

    def _out_state(self, v: np.ndarray, out_dt: np.dtype) -> np.ndarray:
        if not self.layout and v.dtype == out_dt and v.flags.c_contiguous:
            return v    # a fresh contiguous array of the loop's: hand it out as it is
        if self.layout:
            v = v.transpose(1, 0, 2)
        return np.ascontiguousarray(v).astype(out_dt, copy=False)
