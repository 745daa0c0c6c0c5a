"""The examples in the store's docstrings run (they are part of the contract they document)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import gateway.store

MODULES = sorted(m.name for m in pkgutil.iter_modules(gateway.store.__path__, "gateway.store."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_public_names_are_exported() -> None:
    for name in gateway.store.__all__:
        assert hasattr(gateway.store, name), name
