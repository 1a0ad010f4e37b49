"""Benchmark cases: sequence models (LSTM, GRU, stacked/bidirectional, streaming with state).

``cases(quick=False)`` builds the models at call time from public packages (torch's ONNX
exporter; the real silero-vad model where the ``silero-vad`` wheel is installed) and returns
a list of dicts, the format every benchmark case module shares:

- ``name`` (str): unique case name, ``category`` (str): ``CATEGORY``;
- ``model`` (bytes): the serialized ONNX model;
- ``feeds`` (dict[str, np.ndarray]): the inputs of one run;
- optional ``stream`` (callable): ``stream(run)`` runs ``chunks`` consecutive chunks of a
  streaming model, feeding each run's state outputs back as the next run's inputs, where
  ``run(feeds) -> list`` runs the engine under test once (``sess.run(None, feeds)``); a
  runner times ``stream(run)`` (and may divide by ``chunks``: one chunk is one run, the
  state it starts from coming from the previous chunk); ``feeds`` then holds the first
  chunk's inputs;
- optional ``chunks`` (int): how many runs one ``stream`` call makes;
- optional ``note`` (str): where the model comes from.

The model is built once per case; ``quick`` makes smaller or fewer cases for a smoke run.
"""

from __future__ import annotations

import importlib.util
import io
import os
import warnings
from typing import Any, Callable

import numpy as np

CATEGORY = "sequence"

_SEQ = 100          # timesteps of the offline cases
_CHUNK = 512        # samples per 32 ms chunk at 16 kHz (silero-vad's window)


def _export(module: Any, args: tuple, names_in: list[str], names_out: list[str],
            dynamic: dict[str, dict[int, str]] | None = None) -> bytes:
    """The module through torch's TorchScript-based exporter (it writes ONNX's LSTM/GRU ops;
    the dynamo-based one decomposes them), opset 17."""
    import torch

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, buf, input_names=names_in, output_names=names_out,
                          opset_version=17, dynamic_axes=dynamic, dynamo=False)
    return buf.getvalue()


def _recurrent(kind: str, inp: int, hidden: int, layers: int, bidir: bool, batch: int,
               seq: int, head: int = 0) -> tuple[bytes, dict[str, np.ndarray]]:
    import torch

    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
            self.rnn = cls(inp, hidden, num_layers=layers, bidirectional=bidir,
                           batch_first=True)
            self.head = torch.nn.Linear(hidden * (2 if bidir else 1), head) if head else None

        def forward(self, x: Any) -> Any:
            y, _ = self.rnn(x)
            return self.head(y) if self.head is not None else y

    net = Net().eval()
    x = torch.randn(batch, seq, inp)
    data = _export(net, (x,), ["x"], ["y"], {"x": {0: "batch", 1: "time"}})
    return data, {"x": x.numpy()}


def _silero_path() -> str | None:
    """The .onnx file the silero-vad wheel ships, found without importing the package (its
    import pulls torchaudio)."""
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        for name in ("silero_vad.onnx", "silero_vad_16k_op15.onnx"):
            p = os.path.join(root, "data", name)
            if os.path.isfile(p):
                return p
    return None


def _audio(n: int) -> np.ndarray:
    """A deterministic speech-like signal: a few harmonics under a slow envelope, plus
    noise, in [-1, 1]."""
    rng = np.random.default_rng(0)
    t = np.arange(n) / 16000.0
    env = 0.5 * (1 + np.sin(2 * np.pi * 0.7 * t))
    s = sum(np.sin(2 * np.pi * f * t) / k for k, f in enumerate((180, 360, 540, 1100), 1))
    return (0.3 * env * s + 0.02 * rng.standard_normal(n)).astype(np.float32)


def _stream_fn(first: dict[str, np.ndarray], chunks: list[np.ndarray], x_name: str,
               state_map: dict[str, str]) -> Callable[[Callable[..., Any]], None]:
    """``stream(run)``: every chunk through ``run``, the state outputs named in
    ``state_map`` (output index -> input name) fed back."""
    out_idx = {int(k): v for k, v in state_map.items()}

    def stream(run: Callable[..., Any]) -> None:
        feeds = dict(first)
        for c in chunks:
            feeds[x_name] = c
            outs = run(feeds)
            for i, name in out_idx.items():
                feeds[name] = outs[i]
    return stream


def _silero_case(n_chunks: int) -> dict[str, Any] | None:
    path = _silero_path()
    if path is None:
        return None
    import onnx

    model = onnx.load(path)
    names = [i.name for i in model.graph.input]
    outs = [o.name for o in model.graph.output]
    if names[:3] != ["input", "state", "sr"] or len(outs) != 2:
        return None     # a layout this module does not know
    audio = _audio(_CHUNK * n_chunks)
    chunks = [audio[None, i * _CHUNK:(i + 1) * _CHUNK] for i in range(n_chunks)]
    first = {"input": chunks[0], "state": np.zeros((2, 1, 128), np.float32),
             "sr": np.array(16000, np.int64)}
    return {"name": "silero_vad_stream", "category": CATEGORY,
            "model": model.SerializeToString(), "feeds": first,
            "stream": _stream_fn(first, chunks, "input", {"1": "state"}), "chunks": n_chunks,
            "note": f"silero-vad wheel's {os.path.basename(path)}: LSTM inside If on the "
                    f"sample rate, state fed back per 32 ms chunk"}


def _torch_vad(n_chunks: int) -> dict[str, Any]:
    """A silero-like streaming detector exported from torch: framing conv, an LSTM cell
    whose state is an input and an output, all inside an If on the sample rate (one branch
    per rate, as silero's graph has)."""
    import torch

    torch.manual_seed(0)

    class Branch(torch.nn.Module):
        def __init__(self, win: int) -> None:
            super().__init__()
            self.frame = torch.nn.Conv1d(1, 64, kernel_size=win, stride=win // 2)
            self.enc = torch.nn.Conv1d(64, 128, kernel_size=3, padding=1)
            self.rnn = torch.nn.LSTM(128, 128)
            self.out = torch.nn.Linear(128, 1)

        def forward(self, x: torch.Tensor,
                    state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            f = torch.relu(self.enc(torch.relu(self.frame(x[:, None]))))
            f = f.mean(dim=2)[None]                               # (1, B, 128)
            y, (h, c) = self.rnn(f, (state[0:1], state[1:2]))
            return torch.sigmoid(self.out(y[0])), torch.cat([h, c], 0)

    class Vad(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.b16 = Branch(256)
            self.b8 = Branch(128)

        def forward(self, x: torch.Tensor, state: torch.Tensor,
                    sr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            if bool(sr == 16000):
                return self.b16(x, state)
            return self.b8(x, state)

    vad = torch.jit.script(Vad().eval())
    x = torch.zeros(1, _CHUNK)
    st = torch.zeros(2, 1, 128)
    data = _export(vad, (x, st, torch.tensor(16000)), ["input", "state", "sr"],
                   ["output", "stateN"])
    audio = _audio(_CHUNK * n_chunks)
    chunks = [audio[None, i * _CHUNK:(i + 1) * _CHUNK] for i in range(n_chunks)]
    first = {"input": chunks[0], "state": np.zeros((2, 1, 128), np.float32),
             "sr": np.array(16000, np.int64)}
    return {"name": "torch_vad_stream", "category": CATEGORY, "model": data, "feeds": first,
            "stream": _stream_fn(first, chunks, "input", {"1": "state"}), "chunks": n_chunks,
            "note": "torch-exported silero-like detector: LSTM inside If, state fed back"}


def cases(quick: bool = False) -> list[dict[str, Any]]:
    seq = 20 if quick else _SEQ
    out: list[dict[str, Any]] = []
    specs = [
        # name, kind, input, hidden, layers, bidirectional, batch, linear head
        ("lstm_h128_b1", "lstm", 64, 128, 1, False, 1, 0),
        ("gru_h128_b1", "gru", 64, 128, 1, False, 1, 0),
        ("bilstm2_h128_b1", "lstm", 64, 128, 2, True, 1, 32),
        ("lstm2_h256_b8", "lstm", 80, 256, 2, False, 8, 0),
        ("bigru_h64_b16", "gru", 40, 64, 1, True, 16, 10),
    ]
    if quick:
        specs = specs[:3]
    for name, kind, inp, hid, layers, bidir, batch, head in specs:
        data, feeds = _recurrent(kind, inp, hid, layers, bidir, batch, seq, head)
        out.append({"name": name, "category": CATEGORY, "model": data, "feeds": feeds,
                    "note": f"torch.nn.{kind.upper()} exported, {layers} layer(s), "
                            f"{'bidirectional, ' if bidir else ''}sequence {seq}"})
    n_chunks = 20 if quick else 100
    vad = _silero_case(n_chunks)
    out.append(vad if vad is not None else _torch_vad(n_chunks))
    if not quick and vad is not None:
        out.append(_torch_vad(n_chunks))
    return out
