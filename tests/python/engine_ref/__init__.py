"""Reference helpers for the engine's parity tests: tiny random-init transformers models."""
