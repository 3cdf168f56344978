"""Response shapes of the routes whose bodies are built from dicts elsewhere (pipelines, stores,
services): declared here so that every route has a response model, and the OpenAPI document (and
the schemathesis run over it) can check them."""
