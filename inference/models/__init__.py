"""Model architectures (plain PyTorch) the engine can run."""
