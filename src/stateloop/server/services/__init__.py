"""What the routes call: live agents and their runs, and Letta's bodies and objects turned to
and from the store's records."""
