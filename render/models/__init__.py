"""Models the project builds itself, offline (see render.pipeline.builtin_models)."""
