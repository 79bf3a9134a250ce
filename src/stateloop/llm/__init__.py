"""Model providers: OpenAI-compatible, Anthropic and a demo echo; their registry, retries
and token counts."""
