"""A module imported on first attribute access: numpy and the GPU stack cost start-up
time that commands which never touch them (`--help`, `version`, `rules list`) should not
pay."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule(ModuleType):
    """Stands for module `name`; the first attribute read imports it."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__dict__["_lazy_target"] = None

    def __getattr__(self, attr: str) -> Any:
        target = self.__dict__["_lazy_target"]
        if target is None:
            target = importlib.import_module(self.__name__)
            self.__dict__["_lazy_target"] = target
        return getattr(target, attr)
