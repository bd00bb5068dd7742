"""What the withheld-answer tests run in a graded kernel: ``attempt`` records whether a route computes.

``ATTEMPT`` defines ``found`` and ``attempt(name, fn)`` in the kernel: each route to a
withheld piece (a renamed import, the file loaded again, ``exec`` of its text, a subclass)
is tried, and ``found[name]`` says "withheld" when the stub's ImportError answered,
"computed" when something did, or the other error's text.
"""

ATTEMPT = '''
found = {}
def attempt(name, fn):
    try:
        fn()
        found[name] = "computed"
    except ImportError as exc:
        found[name] = "withheld" if "withheld while grading" in str(exc) else f"other: {exc}"
'''
