"""Imported by modpkg.pooljob."""


def spin(n):
    return sum(i * i for i in range(n))
