"""One router per resource of the OpenAI-compatible API."""
