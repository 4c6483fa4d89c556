"""The one error a verb raises for the user: its message is printed as it is."""


class Failed(Exception):
    """A verb could not do what was asked; the message is for the user."""
