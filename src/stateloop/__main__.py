"""``python -m stateloop`` and the ``stateloop`` console script."""

from __future__ import annotations

from .cli import main as run


def main() -> None:
    """Run the ``stateloop`` command line."""
    run()


if __name__ == "__main__":
    main()
