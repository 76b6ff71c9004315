"""Package-level contract of fairlab.metrics: exports, docstrings, layering, JSON."""

import ast
import dataclasses
import inspect
import json
import pathlib

import numpy as np

import fairlab.metrics as fm

PKG = pathlib.Path(fm.__file__).parent


def test_every_public_function_has_a_docstring_with_a_source_or_equation():
    for name in fm.__all__:
        obj = getattr(fm, name)
        if inspect.isfunction(obj):
            doc = inspect.getdoc(obj) or ""
            assert len(doc) > 40, name
            assert "=" in doc or "seed" in doc or "Eq." in doc, name


def test_metrics_never_import_backends_ingest_or_trace():
    for path in PKG.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            # scipy only for the Student-t quantile of run statistics (issue 14: a
            # library instead of hand-written incomplete-beta code)
            banned = ("backends", "ingest", "trace", "pandas") + (() if path.name == "stats.py" else ("scipy",))
            for m in mods:
                assert not any(x in m for x in banned), (path, m)


def test_result_objects_are_frozen_and_strict_json():
    m = np.array([[10.0, np.nan], [20.0, 0.0], [np.nan, np.nan]])
    results = [
        fm.jain_summary(m),
        fm.mean_jain_over_time(m),
        fm.jain_of_means(m),
        fm.jain_over_time(m),
        fm.nru(m, expected=[10.0, 10.0], t_e=0),
        fm.harm_summary([1.0, 0.0], [0.5, 1.0], clip=False),
        fm.run_stats([1.0]),
    ]
    for r in results:
        assert dataclasses.is_dataclass(r)
        assert type(r).__dataclass_params__.frozen
        json.dumps(r.to_dict(), allow_nan=False)


def test_public_api_is_fully_typed_with_an_example_each():
    """`fairlab.load`, `analyze`, `simulate`, `open_campaign`, ...: every parameter and
    the return value annotated, no catch-all **kwargs, and a docstring example."""
    import fairlab

    for name in fairlab.__all__:
        obj = getattr(fairlab, name)
        if not inspect.isfunction(obj):
            continue
        sig = inspect.signature(obj)
        assert all(p.kind is not p.VAR_KEYWORD for p in sig.parameters.values()), name
        hints = obj.__annotations__  # strings (postponed evaluation); TYPE_CHECKING-only names stay unresolved
        assert set(sig.parameters) <= set(hints) and "return" in hints, name
        assert ">>> " in (inspect.getdoc(obj) or ""), name


def test_public_api_docstring_examples_run(monkeypatch):
    """The examples that do not need a campaign directory run as written (from the
    repository root, where examples/ is)."""
    import doctest

    import fairlab
    import fairlab.analysis

    monkeypatch.chdir(PKG.parents[2])
    for mod in (fairlab, fairlab.analysis):
        res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert res.failed == 0, mod.__name__
    assert doctest.testmod(fairlab).attempted >= 4
