"""``python -m stateloop`` and the ``stateloop`` console script."""

from __future__ import annotations


def main() -> None:
    """Run the ``stateloop`` command line."""
    from .cli import main as run

    run()


if __name__ == "__main__":
    main()
