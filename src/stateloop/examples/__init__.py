"""Example programs: ``python -m stateloop.examples.quickstart`` runs an agent end to end."""
