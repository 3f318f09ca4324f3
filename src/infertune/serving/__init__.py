"""Serving: load tests against OpenAI-compatible servers, and server trials."""
