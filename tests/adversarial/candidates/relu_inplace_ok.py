"""CORRECT look-alike for a task that declares mutates_inputs=True: relu in place, input returned."""


def relu_(x):
    x.clamp_(min=0)
    return x
