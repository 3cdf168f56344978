"""The platform's use cases and the one `Platform` each process builds (usecases/README.md)."""
