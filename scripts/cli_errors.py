"""One-line errors for resil's plotting scripts, with resil's exit codes (docs/reference/exit-codes.md):
2 a bad command line, 3 a file that cannot be read or written, 4 an input that is not what it
should be. No traceback reaches the user."""
import json
import os
import sys


def die(code, msg):
    print(f"{os.path.basename(sys.argv[0])}: error: {msg}", file=sys.stderr)
    sys.exit(code)


def load_json(path, what, keys):
    """The JSON object in PATH, which must hold KEYS (else exit 4 naming PATH and WHAT it should be)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        die(3, f"{path}: {e.strerror}")
    except UnicodeDecodeError:
        die(4, f"{path}: not {what} (not UTF-8 text)")
    try:
        obj = json.loads(text)
    except ValueError as e:
        die(4, f"{path}: not {what} (not JSON: {e})")
    missing = [k for k in keys if not isinstance(obj, dict) or k not in obj]
    if missing:
        die(4, f"{path}: not {what} (no {', '.join(repr(k) for k in missing)})")
    return obj


def require_dir(path, what):
    """PATH must be an existing directory (exit 3 otherwise)."""
    if not os.path.isdir(path or "."):
        die(3, f"{path}: {what} is not an existing directory")


def malformed(path, what, fn, *args):
    """fn(*args); a field of the wrong shape in PATH (KeyError, TypeError, ...) is exit 4 naming it."""
    try:
        return fn(*args)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        die(4, f"{path}: a malformed {what} ({type(e).__name__}: {e})")
