"""Fixtures: real CEL engines, each in turn (`engine`) or the default one (`default_engine`)."""

from tests.support.engines import default_engine, engine

__all__ = ["default_engine", "engine"]
