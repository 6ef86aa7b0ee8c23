"""Commands that live in their own modules; each has `register(app)`, called by gpuplan.cli."""
