"""The C accelerator builder (common/cext.py): discovery, compile, errors, loading."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sysconfig
from pathlib import Path

import pytest

from common import cext

SOURCE = """
#define PY_SSIZE_T_CLEAN
#include <Python.h>
static PyObject *add(PyObject *self, PyObject *args) {
    long a, b;
    if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
    return PyLong_FromLong(a + b);
}
static PyMethodDef methods[] = {{"add", add, METH_VARARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_probe", NULL, -1, methods};
PyMODINIT_FUNC PyInit__probe(void) { return PyModule_Create(&mod); }
"""


def _ext(tmp_path: Path, text: str) -> cext.Extension:
    src = tmp_path / "_probe.c"
    src.write_text(text)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    return cext.Extension("_probe", src, tmp_path / f"_probe{suffix}")


def test_discover_names_modules_after_their_source() -> None:
    found = {e.module: e for e in cext.discover()}
    assert found, "the project ships C accelerators"
    for module, ext in found.items():
        assert ext.source.name.startswith("_") and ext.source.suffix == ".c"
        assert module.split(".")[-1] == ext.source.stem
        assert ext.target.parent == ext.source.parent


def test_build_one_compiles_an_importable_module(tmp_path: Path) -> None:
    ext = _ext(tmp_path, SOURCE)
    assert ext.stale()
    cext.build_one(ext)
    assert not ext.stale()
    loader = importlib.machinery.ExtensionFileLoader("_probe", str(ext.target))
    spec = importlib.util.spec_from_loader("_probe", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    assert module.add(40, 2) == 42


def test_a_compile_error_is_reported_with_the_compiler_output(tmp_path: Path) -> None:
    ext = _ext(tmp_path, SOURCE.replace("return PyLong_FromLong(a + b);", "return nope(a);"))
    with pytest.raises(RuntimeError, match="building _probe failed") as err:
        cext.build_one(ext)
    assert "nope" in str(err.value)
    assert not ext.target.exists()


def test_pure_python_switch_disables_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cext.PURE_ENV, "1")
    assert cext.load("common._pktio") is None
    assert cext.PURE_ENV in cext.why_missing("common._pktio")


def test_missing_module_gives_a_reason() -> None:
    assert cext.load("common._no_such_accelerator") is None
    assert "make install" in cext.why_missing("common._no_such_accelerator")


def test_built_accelerators_import() -> None:
    """After `make install` every accelerator is built and loads (no silent fallback)."""
    for ext in cext.discover():
        assert not ext.stale(), f"{ext.module} is not built or older than its source"
        assert cext.load(ext.module) is not None or cext.why_missing(ext.module).startswith(
            cext.PURE_ENV
        ), cext.why_missing(ext.module)
