"""One router per Letta resource."""
