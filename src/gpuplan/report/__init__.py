"""Rendering results for people: text (rich) and JSON. No estimation here."""
