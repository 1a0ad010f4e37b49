"""Geometry, detection, attention and image ops: Resize, GridSample, RoiAlign, NMS, Attention..."""
