"""Placeholder replaced below."""


def register() -> None:
    return None
