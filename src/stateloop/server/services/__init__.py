"""What the routes call: the live agents and runs, and store records shown as Letta's objects."""
