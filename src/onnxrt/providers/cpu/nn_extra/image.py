"""ImageDecoder (20): decode BMP/JPEG/JPEG2000/TIFF/PNG/WebP/PNM bytes to an HWC uint8 image.

Decoding needs the optional dependency Pillow; it is imported on first use so that the
package imports without it, and a missing Pillow is reported at run time, naming it.
"""

from __future__ import annotations

import io

import numpy as np

from onnxrt.errors import NotImplemented as NotImplementedErr
from onnxrt.providers.cpu import CPU

_FORMATS = ("RGB", "BGR", "Grayscale")


def _pil_image():
    try:
        from PIL import Image
    except ImportError:
        raise NotImplementedErr(
            "ImageDecoder needs the optional dependency 'pillow' (pip install pillow), which "
            "is not installed") from None
    return Image


@CPU.kernel("ImageDecoder", since=20)
def image_decoder(encoded_stream, *, pixel_format):
    if pixel_format not in _FORMATS:
        raise ValueError(f"ImageDecoder: pixel_format must be one of {_FORMATS}, "
                         f"got {pixel_format!r}")
    image_mod = _pil_image()
    data = np.ascontiguousarray(encoded_stream, dtype=np.uint8).tobytes()
    try:
        with image_mod.open(io.BytesIO(data)) as img:
            img = img.convert("L" if pixel_format == "Grayscale" else "RGB")
            arr = np.asarray(img, dtype=np.uint8)
    except Exception:  # the spec: an undecodable stream gives an empty image
        return np.zeros((0, 0, 0), dtype=np.uint8)
    if pixel_format == "Grayscale":
        return np.ascontiguousarray(arr[:, :, None])
    if pixel_format == "BGR":
        return np.ascontiguousarray(arr[:, :, ::-1])
    return np.ascontiguousarray(arr)
