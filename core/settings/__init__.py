from functools import lru_cache

from core.settings.base import Settings


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once; pass them on rather than calling this everywhere."""
    return Settings()


__all__ = ["Settings", "get_settings"]
