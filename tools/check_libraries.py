"""Run real libraries that ship ONNX models and call onnxruntime, unchanged, on onnxrt.

    python tools/check_libraries.py [NAME ...] [--list]

Each library's program runs twice in fresh processes: as written (the installed onnxruntime)
and under ``python -m onnxrt.run_as_onnxruntime`` (``onnxruntime`` mapped to onnxrt). Each
program prints its results as JSON; labels and texts must be equal, numbers within a relative
1e-3 (scores, boxes, probabilities) of onnxruntime's. Nothing is downloaded: every model
ships inside its library's wheel, every input is made by the program itself.

The libraries are not dependencies of onnxrt. magika and silero-vad come with the ``test``
extra (tests/api/test_libraries.py runs them); the others need
``pip install rapidocr_onnxruntime rapid-layout ddddocr nudenet``. A library that is not
installed is reported as such.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import subprocess
import sys
import time
from typing import Any

# an image with printed text, drawn with PIL's built-in font (no font files needed)
_TEXT_IMAGE = r'''
from PIL import Image, ImageDraw, ImageFont
def text_image(lines, size=(640, 200), font_size=36):
    img = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=font_size)
    for i, line in enumerate(lines):
        draw.text((20, 20 + i * (font_size + 16)), line, fill="black", font=font)
    return img
'''

PROGRAMS: dict[str, dict[str, Any]] = {
    "magika": {
        "module": "magika",
        "what": "file type detection (Google's magika, standard_v3_3 model)",
        "code": r'''
import base64, json, zlib, struct
from magika import Magika
def png(w=16, h=16):
    raw = b"".join(b"\x00" + bytes((x * 16 + y) % 256 for x in range(w * 3)) for y in range(h))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
samples = {
    "python": b"import os\nimport sys\n\ndef main():\n    print(os.getcwd(), sys.argv)\n\n"
              b"if __name__ == '__main__':\n    main()\n",
    "json": b'{"name": "onnxrt", "tags": ["onnx", "runtime"], "nested": {"a": 1, "b": [1, 2]}}',
    "html": b"<!DOCTYPE html><html><head><title>t</title></head><body><h1>Hi</h1>"
            b"<p>Some text in a paragraph.</p></body></html>",
    "c": b"#include <stdio.h>\n\nint main(int argc, char **argv) {\n  printf(\"%d\\n\", argc);"
         b"\n  return 0;\n}\n",
    "csv": b"id,name,score\n" + b"".join(b"%d,item%d,%d.5\n" % (i, i, i * 3) for i in range(30)),
    "png": png(),
    "shell": b"#!/bin/sh\nset -e\nfor f in *.txt; do\n  echo \"$f\"\n  wc -l \"$f\"\ndone\n",
}
m = Magika()
out = {}
for name, data in samples.items():
    r = m.identify_bytes(data)
    out[name] = {"label": str(r.output.label), "dl": str(r.prediction.dl.label),
                 "score": float(r.score)}
print(json.dumps(out))
''',
    },
    "silero-vad": {
        "module": "silero_vad",
        "what": "voice activity detection (silero_vad.onnx, a stateful LSTM run per 512-sample "
                "chunk, and the torch-free sequence model)",
        "code": r'''
import json
import numpy as np
import torch
from silero_vad import load_silero_vad, get_speech_timestamps
sr = 16000
t = np.arange(sr * 3) / sr
rng = np.random.default_rng(0)
# voiced bursts (a 120 Hz harmonic series under a 4 Hz syllable envelope) between silences
voiced = sum(np.sin(2 * np.pi * 120 * k * t) / k for k in range(1, 12))
env = (np.sin(2 * np.pi * 4 * t) > 0) * ((t > 0.8) & (t < 2.2))
wav = (0.3 * voiced * env + 0.003 * rng.standard_normal(t.size)).astype(np.float32)
model = load_silero_vad(onnx=True)
probs = [float(model(torch.from_numpy(wav[i:i + 512]), sr))
         for i in range(0, len(wav) - 511, 512)]
model.reset_states()
stamps = get_speech_timestamps(torch.from_numpy(wav), model, sampling_rate=sr)
seq = load_silero_vad(sequence=True)
seq_probs = [float(p) for p in seq.audio_forward(wav, sr)]
print(json.dumps({"probs": probs, "timestamps": stamps, "sequence_probs": seq_probs}))
''',
    },
    "rapidocr_onnxruntime": {
        "module": "rapidocr_onnxruntime",
        "what": "OCR (PP-OCRv4 detection, direction classifier and recognition)",
        "code": _TEXT_IMAGE + r'''
import json
import numpy as np
from rapidocr_onnxruntime import RapidOCR
img = np.array(text_image(["ONNX runtime 2026", "Hello, drop-in world!"]))
engine = RapidOCR()
result, _ = engine(img)
print(json.dumps([{"box": [[float(v) for v in p] for p in box], "text": text,
                   "score": float(score)} for box, text, score in (result or [])]))
''',
    },
    "rapid_layout": {
        "module": "rapid_layout",
        "what": "document layout detection (layout_cdla, a YOLO-style detector)",
        "code": _TEXT_IMAGE + r'''
import json
import numpy as np
from PIL import ImageDraw
from rapid_layout import RapidLayout
img = text_image(["Annual report", "", "Section one: results of the year and some more",
                  "words to make a paragraph of running text here."], size=(800, 1000),
                 font_size=28)
d = ImageDraw.Draw(img)
for r in range(5):  # a table
    for c in range(4):
        d.rectangle([60 + c * 160, 400 + r * 50, 60 + (c + 1) * 160, 400 + (r + 1) * 50],
                    outline="black", width=2)
        d.text((70 + c * 160, 410 + r * 50), f"{r * c}.{c}", fill="black")
engine = RapidLayout()
res = engine(np.array(img))
boxes, scores, names = res.boxes, res.scores, res.class_names
print(json.dumps({"boxes": [[float(v) for v in b] for b in (boxes if boxes is not None else [])],
                  "scores": [float(s) for s in (scores if scores is not None else [])],
                  "names": [str(n) for n in (names if names is not None else [])]}))
''',
    },
    "ddddocr": {
        "module": "ddddocr",
        "what": "captcha OCR (common.onnx, a CRNN) and text detection (common_det.onnx)",
        "code": _TEXT_IMAGE + r'''
import io, json
import ddddocr
def png(img):
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()
det = ddddocr.DdddOcr(det=True, ocr=False, show_ad=False)
boxes = det.detection(png(text_image(["A 7 k Q", "m 3 Z"], size=(320, 160), font_size=48)))
ocr = ddddocr.DdddOcr(show_ad=False)
text = ocr.classification(png(text_image(["x7Kp2"], size=(160, 60), font_size=40)))
print(json.dumps({"text": text, "boxes": [[float(v) for v in b] for b in boxes]}))
''',
    },
    "nudenet": {
        "module": "nudenet",
        "what": "image content detection (NudeNet's 320n YOLOv8 detector) on the portrait "
                "photo matplotlib ships",
        "code": r'''
import json
from matplotlib import cbook
from nudenet import NudeDetector
path = cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
dets = NudeDetector().detect(str(path))
print(json.dumps([{"class": x["class"], "score": float(x["score"]),
                   "box": [float(v) for v in x["box"]]} for x in dets]))
''',
    },
}


def run_program(name: str, on_onnxrt: bool, timeout: float = 600) -> tuple[Any, float, str]:
    """(parsed JSON result or None, seconds, error text)."""
    code = PROGRAMS[name]["code"]
    cmd = [sys.executable, "-m", "onnxrt.run_as_onnxruntime", "-c", code] if on_onnxrt \
        else [sys.executable, "-c", code]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    dt = time.perf_counter() - t0
    if out.returncode != 0:
        return None, dt, (out.stderr.strip().splitlines() or ["(no output)"])[-1]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(("{", "["))]
    if not lines:
        return None, dt, "printed no JSON result"
    return json.loads(lines[-1]), dt, ""


def differences(ref: Any, got: Any, where: str = "", rtol: float = 1e-3,
                atol: float = 1e-4) -> list[str]:
    """Where two JSON results differ (numbers within rtol/atol count as equal)."""
    if isinstance(ref, dict):
        if not isinstance(got, dict) or set(ref) != set(got):
            return [f"{where}: keys {sorted(ref) if isinstance(ref, dict) else ref} vs "
                    f"{sorted(got) if isinstance(got, dict) else got}"]
        return [d for k in ref for d in differences(ref[k], got[k], f"{where}.{k}", rtol, atol)]
    if isinstance(ref, list):
        if not isinstance(got, list) or len(ref) != len(got):
            return [f"{where}: {len(ref)} items vs "
                    f"{len(got) if isinstance(got, list) else got!r}"]
        return [d for i, (a, b) in enumerate(zip(ref, got))
                for d in differences(a, b, f"{where}[{i}]", rtol, atol)]
    if isinstance(ref, float) or isinstance(got, float):
        if isinstance(got, (int, float)) and math.isclose(ref, got, rel_tol=rtol,
                                                          abs_tol=atol):
            return []
        return [f"{where}: {ref!r} vs {got!r}"]
    return [] if ref == got else [f"{where}: {ref!r} vs {got!r}"]


def summary(result: Any) -> str:
    text = json.dumps(result, ensure_ascii=False)
    return text if len(text) <= 160 else text[:157] + "..."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"libraries to run (default: all of "
                                             f"{', '.join(PROGRAMS)})")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    if args.list:
        for name, p in PROGRAMS.items():
            print(f"{name}: {p['what']}")
        return 0
    names = args.names or list(PROGRAMS)
    failed = 0
    for name in names:
        prog = PROGRAMS[name]
        print(f"== {name}: {prog['what']}")
        if importlib.util.find_spec(prog["module"]) is None:
            print(f"   not installed (pip install {name})")
            continue
        ref, t_ref, err_ref = run_program(name, False)
        got, t_got, err_got = run_program(name, True)
        if ref is None:
            print(f"   onnxruntime run failed: {err_ref}")
        print(f"   onnxruntime ({t_ref:.1f} s): {summary(ref)}")
        if got is None:
            print(f"   onnxrt run failed: {err_got}")
            failed += 1
            continue
        print(f"   onnxrt      ({t_got:.1f} s): {summary(got)}")
        if ref is not None:
            diff = differences(ref, got)
            print("   same result" if not diff else f"   DIFFERENT: {'; '.join(diff[:5])}")
            failed += bool(diff)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
