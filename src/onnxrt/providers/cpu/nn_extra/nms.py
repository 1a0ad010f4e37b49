"""NonMaxSuppression (10, 11): greedy per (batch, class) selection.

Candidates (best first) are settled a block at a time: one IoU matrix per block, a cheap
boolean row update per kept box, then the block's kept boxes suppress all later candidates at
once. No loop over pairs and no full N x N IoU matrix.
"""

from __future__ import annotations

import numpy as np

from onnxrt.providers.cpu import CPU


def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """[..., 4] boxes as (y_min, x_min, y_max, x_max) in float64."""
    b = boxes.astype(np.float64)
    if center_point_box:
        xc, yc, w, h = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=-1)
    y1, x1, y2, x2 = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2),
                     np.maximum(x1, x2)], axis=-1)


def _iou(c: np.ndarray, area: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix [len(a), len(b)] of boxes ``a`` and ``b`` (indices into corner form ``c``)."""
    ca, cb = c[a][:, None, :], c[b][None, :, :]
    ih = np.minimum(ca[..., 2], cb[..., 2]) - np.maximum(ca[..., 0], cb[..., 0])
    iw = np.minimum(ca[..., 3], cb[..., 3]) - np.maximum(ca[..., 1], cb[..., 1])
    inter = np.clip(ih, 0, None) * np.clip(iw, 0, None)
    union = area[a][:, None] + area[b][None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def _greedy(c: np.ndarray, iou_t: float, max_out: int) -> list[int]:
    """Greedy NMS over boxes already sorted best first; returns the kept positions.

    Candidates go in blocks: one IoU matrix per block settles the block with cheap boolean
    row updates, then the block's kept boxes suppress the later candidates in one shot.
    """
    n = c.shape[0]
    area = (c[:, 2] - c[:, 0]) * (c[:, 3] - c[:, 1])
    live = np.ones(n, dtype=bool)
    kept: list[int] = []
    block = int(min(n, max(64, min(2 * max_out, 1024))))
    for p0 in range(0, n, block):
        if len(kept) >= max_out:
            break
        p1 = min(n, p0 + block)
        ids = p0 + np.nonzero(live[p0:p1])[0]
        if ids.size == 0:
            continue
        over = _iou(c, area, ids, ids) > iou_t
        alive = np.ones(ids.size, dtype=bool)
        new = []
        for j in range(ids.size):
            if not alive[j]:
                continue
            new.append(j)
            if len(kept) + len(new) >= max_out:
                break
            alive &= ~over[j]
        new_ids = ids[new]
        kept.extend(new_ids.tolist())
        later = p1 + np.nonzero(live[p1:])[0]
        if later.size and new_ids.size and len(kept) < max_out:
            hit = (_iou(c, area, new_ids, later) > iou_t).any(axis=0)
            live[later[hit]] = False
    return kept


@CPU.kernel("NonMaxSuppression", since=10, host_inputs=(2, 3, 4))
def non_max_suppression(boxes, scores, max_output_boxes_per_class=None, iou_threshold=None,
                        score_threshold=None, *, center_point_box):
    if boxes.ndim != 3 or boxes.shape[2] != 4:
        raise ValueError(f"NonMaxSuppression: boxes must be [batches, boxes, 4], got "
                         f"{boxes.shape}")
    if scores.ndim != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise ValueError(f"NonMaxSuppression: scores shape {scores.shape} does not match boxes "
                         f"{boxes.shape}")
    max_out = 0 if max_output_boxes_per_class is None or \
        np.asarray(max_output_boxes_per_class).size == 0 \
        else int(np.asarray(max_output_boxes_per_class).reshape(-1)[0])
    iou_t = 0.0 if iou_threshold is None or np.asarray(iou_threshold).size == 0 \
        else float(np.asarray(iou_threshold).reshape(-1)[0])
    has_st = score_threshold is not None and np.asarray(score_threshold).size > 0
    score_t = float(np.asarray(score_threshold).reshape(-1)[0]) if has_st else 0.0
    if max_out <= 0 or boxes.shape[1] == 0:
        return np.zeros((0, 3), dtype=np.int64)
    corners = _corners(boxes, center_point_box)
    picked: list[np.ndarray] = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c].astype(np.float64)
            cand = np.nonzero(s > score_t)[0] if has_st else np.arange(s.size)
            if cand.size == 0:
                continue
            # highest score first; equal scores keep the lower box index first
            cand = cand[np.argsort(-s[cand], kind="stable")]
            sel = _greedy(corners[b, cand], iou_t, max_out)
            if sel:
                idx = cand[np.asarray(sel)]
                picked.append(np.stack([np.full(idx.size, b), np.full(idx.size, c), idx], 1))
    if not picked:
        return np.zeros((0, 3), dtype=np.int64)
    return np.concatenate(picked).astype(np.int64)
