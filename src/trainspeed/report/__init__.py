"""Renderers: result objects in, text / JSON / PNG out."""
