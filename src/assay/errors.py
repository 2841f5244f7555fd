"""Errors that are the user's to fix. The CLI prints them as one line and exits 2.

    AssayError
     └── UserError            (exit 2: the input is wrong, not the candidate)
          ├── TaskError       malformed or unusable task file
          └── CandidateError  missing candidate file or no entry point
"""

from __future__ import annotations


class AssayError(Exception):
    pass


class UserError(AssayError):
    def __init__(self, message: str, path: str | None = None) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)

    def at(self, path: str) -> "UserError":
        """The same error, naming the file it is about."""
        return type(self)(self.message, path)


class TaskError(UserError):
    pass


class CandidateError(UserError):
    pass
