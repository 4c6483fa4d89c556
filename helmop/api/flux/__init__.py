"""Flux's API as an adapter onto helmop's one internal model: Flux's kinds are parsed into helmop's specs
(what helmop does not implement refused by name) and their status written in Flux's shape."""
