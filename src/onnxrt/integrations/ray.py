"""onnxrt on Ray, for more than one process or machine.

Batch inference over a Ray Dataset, one session per actor::

    ds.map_batches(OnnxPredictor, fn_constructor_kwargs={"model": "model.onnx"},
                   concurrency=4, num_cpus=1, batch_size=64)

and the Open Inference Protocol server as a Ray Serve deployment (``OnnxrtDeployment``,
imported from here lazily, so Ray Data alone does not need Ray Serve). Ray places actors
and replicas wherever the cluster has the resources asked for: the same code runs on a
laptop and on a cluster that ``ray.init(address=...)`` or ``RAY_ADDRESS`` points at. A
model given as bytes travels with the actor's arguments to any node; a path must exist on
every node that runs an actor.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["OnnxPredictor", "OnnxrtDeployment"]


def _model_source(model: Any) -> str | bytes:
    if isinstance(model, (str, bytes)):
        return model
    if hasattr(model, "SerializeToString"):      # onnx.ModelProto
        return model.SerializeToString()
    import os

    if isinstance(model, os.PathLike):
        return os.fspath(model)
    raise TypeError(f"model must be a path, bytes or an onnx.ModelProto, got "
                    f"{type(model).__name__}")


class OnnxPredictor:
    """A callable class for ``Dataset.map_batches``: each actor makes one session and runs
    it on NumPy batches (``dict`` of column name -> array, Ray Data's default format).

    ``input_columns`` maps model input -> column (default: the columns named like the
    inputs); ``output_columns`` maps model output -> column (default: the output names);
    ``keep_columns`` keeps the batch's other columns beside the outputs. ``providers``
    and ``threads`` (intra-op threads of the session) are per actor; ask Ray for as many
    CPUs per actor (``num_cpus=``) as ``threads``. A model whose first dimension is fixed
    to k runs the batch k rows at a time.
    """

    def __init__(self, model: Any, *, providers: Sequence[Any] | None = None,
                 threads: int = 0, input_columns: Mapping[str, str] | None = None,
                 output_columns: Mapping[str, str] | None = None,
                 keep_columns: bool = True, sess_options: Any = None) -> None:
        import onnxrt as ort

        so = sess_options if sess_options is not None else ort.SessionOptions()
        if threads:
            so.intra_op_num_threads = threads
        self.session = ort.InferenceSession(_model_source(model), so,
                                            providers=list(providers) if providers else None)
        inputs = self.session.get_inputs()
        self.input_columns = {a.name: a.name for a in inputs}
        if input_columns:
            unknown = set(input_columns) - set(self.input_columns)
            if unknown:
                raise ValueError(f"input_columns names {sorted(unknown)}, which are not "
                                 f"inputs of the model (inputs: {sorted(self.input_columns)})")
            self.input_columns.update(input_columns)
        outputs = [a.name for a in self.session.get_outputs()]
        self.output_columns = {n: n for n in outputs}
        if output_columns:
            unknown = set(output_columns) - set(outputs)
            if unknown:
                raise ValueError(f"output_columns names {sorted(unknown)}, which are not "
                                 f"outputs of the model (outputs: {outputs})")
            self.output_columns = dict(output_columns)
        self.keep_columns = keep_columns
        first = inputs[0].shape[0] if inputs and inputs[0].shape else None
        self.chunk = first if isinstance(first, int) and first > 0 else None

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if not isinstance(batch, Mapping):
            raise TypeError("OnnxPredictor takes NumPy batches: map_batches(..., "
                            f"batch_format='numpy'), got {type(batch).__name__}")
        missing = [c for c in self.input_columns.values() if c not in batch]
        if missing:
            raise KeyError(f"the batch has no column {missing[0]!r} for the model's input "
                           f"(columns: {sorted(batch)})")
        feeds = {name: np.asarray(batch[col]) for name, col in self.input_columns.items()}
        names = list(self.output_columns)
        rows = len(next(iter(feeds.values()))) if feeds else 0
        if self.chunk is None or rows == self.chunk:
            values = self.session.run(names, feeds)
        else:
            if rows % self.chunk:
                raise ValueError(f"the model's first dimension is fixed to {self.chunk}; a "
                                 f"batch of {rows} rows does not split into such parts "
                                 f"(choose batch_size as a multiple of {self.chunk})")
            parts = [self.session.run(names, {k: v[i:i + self.chunk]
                                              for k, v in feeds.items()})
                     for i in range(0, rows, self.chunk)]
            values = [np.concatenate([p[j] for p in parts]) for j in range(len(names))]
        out = dict(batch) if self.keep_columns else {}
        for name, value in zip(names, values):
            out[self.output_columns[name]] = value
        return out


def __getattr__(name: str) -> Any:
    if name == "OnnxrtDeployment":
        from onnxrt.integrations.ray_serve import OnnxrtDeployment

        return OnnxrtDeployment
    raise AttributeError(name)
