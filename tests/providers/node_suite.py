"""The ONNX backend node suite through one provider: what the OpenVINO and TVM suites share.

Each provider's suite names a REPRESENTATIVE case per op family it takes (those must put
nodes on the provider) and the DECLINED cases with the words its placement report gives
for leaving them on the CPU; by default only those run, ``full`` runs every case. In every
case the outputs must match the stored ones within the case's tolerances.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Iterator

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from onnx.backend.test.loader import load_node_model_tests

from conformance.exclusions import EXCLUDED
from oracle import assert_all_similar, normalize


def node_cases(representative: list[str], declined: dict[str, str],
               full: bool) -> Iterator[Any]:
    """The suite's cases to run, as pytest params named after the case."""
    wanted = None if full else {f"test_{n}" for n in representative + list(declined)}
    for case in load_node_model_tests():
        if case.name in EXCLUDED or (wanted is not None and case.name not in wanted):
            continue
        yield pytest.param(case, id=case.name)


def check_node_case(case: Any, sess: Any, representative: list[str],
                    declined: dict[str, str], nodes_on: Callable[[Any], int],
                    run: Callable[[Any, dict], list] | None = None) -> None:
    """Placement as the lists say, then every data set against its stored outputs;
    ``run(sess, feeds)`` wraps the call where a provider needs more around it."""
    short = case.name[len("test_"):]
    if short in representative:
        assert nodes_on(sess) > 0, sess.placement_report()
    if short in declined:
        report = sess.placement_report()
        assert declined[short] in report, report
    names = [i.name for i in case.model.graph.input]
    out_names = [o.name for o in case.model.graph.output]
    for inputs, refs in case.data_sets:
        feeds = {n: normalize(v) for n, v in zip(names, inputs)}
        outs = run(sess, feeds) if run is not None else sess.run(None, feeds)
        assert_all_similar(refs, outs, case.rtol, case.atol, out_names)


def missing_cases(representative: list[str], declined: dict[str, str]) -> list[str]:
    """Names in the lists that the installed onnx's suite does not have."""
    names = {c.name for c in load_node_model_tests()}
    return [n for n in representative + list(declined) if f"test_{n}" not in names]
