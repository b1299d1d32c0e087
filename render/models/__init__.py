"""Models the project builds itself, offline (see render.run.loader.builtin_models)."""
