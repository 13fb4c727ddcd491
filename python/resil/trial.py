"""A campaign trial as a Python function, run as a command or by a resident worker.

Your trial module defines a function that takes a checkpoint path and returns its metrics, and
hands it to main():

    import resil.trial

    def setup():                      # optional: once per process (per worker in "mode": "worker")
        return load_test_data()       # whatever the trials share: data, a model skeleton

    def evaluate(ckpt, trial):        # trial.state is what setup() returned
        model = load(ckpt)
        return {"test_accuracy": acc, "test_loss": loss}

    if __name__ == "__main__":
        resil.trial.main(evaluate=evaluate, setup=setup)

`python3 mytrial.py eval --from CKPT --out SUMMARY` then runs one trial (setup, the function,
the summary JSON, resil's exit codes), and a campaign with `"mode": "worker"` starts
`python3 mytrial.py serve --preload GOLDEN` once per job: it imports torch, the module and the
data once, then runs each trial in a forked child, speaking the protocol of `ckpt-train serve`
(docs/design/campaigns.md): the same records as the command, at the cost of a fork.
A `resume` function (checkpoint path in, training from it, metrics out, `last_checkpoint` naming
what it saved) makes `resume` trials; docs/guide/pytorch.md has the whole workflow.
"""
import argparse
import ctypes
import fcntl
import inspect
import json
import os
import re
import signal
import stat
import struct
import sys
import time
import traceback

from resil import frames

# resil's exit codes (docs/reference/exit-codes.md): a campaign's defaults classify them.
EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_IO, EXIT_CORRUPT, EXIT_NUMERIC, EXIT_MISMATCH = 0, 1, 2, 3, 4, 6, 7
EXIT_INTERRUPTED = 128 + signal.SIGINT  # ^C (KeyboardInterrupt) in setup() or the function: 130, as a shell reports it
SUBCOMMANDS = ("eval", "resume")
# Keys of the summary that the runner writes; a function's result may not use them.
RESERVED = ("exit_code", "error", "function_seconds", "wall_seconds")


class Failure(Exception):
    """An expected failure: its message is the one stderr line, `code` the exit code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class LoadFailure(Failure):
    """The checkpoint cannot be read (exit 4: load_failure in a campaign)."""

    def __init__(self, message):
        super().__init__(EXIT_CORRUPT, message)


class NonFinite(Failure):
    """NaN/Inf seen in a loss, a weight or an output (exit 6, "nan_detected": true: nan_at_load or nan_later)."""

    def __init__(self, message):
        super().__init__(EXIT_NUMERIC, message)


class Mismatch(Failure):
    """The checkpoint loads but is not one this trial can use: other keys, shapes, layout (exit 7)."""

    def __init__(self, message):
        super().__init__(EXIT_MISMATCH, message)


class Trial:
    """What a trial function is given besides the checkpoint path.

    checkpoint: the checkpoint to load ({ckpt}); kind: "eval" or "resume"; dir: the trial's empty
    scratch directory ({dir}, or None); index: the trial id as given ({trial}: a string such as
    "17", "golden" for the golden run, or None; int(trial.index) for the number); seed: the
    trial's derived seed ({seed}: an int, or None); args: the --arg KEY=VALUE pairs (strings);
    state: what setup() returned (None without setup)."""

    def __init__(self, checkpoint, kind, dir, index, seed, args, state):
        self.checkpoint, self.kind, self.dir, self.index = checkpoint, kind, dir, index
        self.seed, self.args, self.state = seed, args, state

    def __repr__(self):
        return f"Trial({self.kind} {self.checkpoint!r}, dir={self.dir!r}, index={self.index!r}, seed={self.seed})"


class _Spec:
    def __init__(self, prog, functions, setup):
        self.prog, self.functions, self.setup = prog, functions, setup


# ---------------------------------------------------------------------------------------------
# Command line.

class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every resil program; --help has the usage
        raise Failure(EXIT_USAGE, message)


def _key_value(s):
    key, sep, value = s.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{s!r} is not KEY=VALUE")
    return key, value


def _seed(s):
    """A campaign's {seed}: decimal digits only (no sign, blanks, 0x, underscores), in [0, 2^64-1]."""
    if not re.fullmatch(r"[0-9]+", s, re.ASCII):
        raise argparse.ArgumentTypeError(f"{s!r} is not a decimal integer in [0, 2^64-1]")
    v = int(s)
    if v >= 1 << 64:
        raise argparse.ArgumentTypeError(f"{s} is not in [0, 2^64-1]")
    return v


def _parser(spec):
    examples = (f"examples:\n"
                f"  {spec.prog} eval --from golden.pt --out summary.json         # one trial, as a campaign runs it\n"
                f"  {spec.prog} resume --from golden.pt --dir scratch --out summary.json\n"
                f"  campaign command: [\"python3\", \"{spec.prog}\", \"eval\", \"--from\", \"{{ckpt}}\", \"--out\", \"{{out}}\"],\n"
                f"  with \"mode\": \"worker\" for one resident worker per job (docs/guide/pytorch.md)\n\n"
                f"exit codes: 0 ok, 1 an exception in setup() or the trial, 2 usage, 3 io, 4 checkpoint unreadable (LoadFailure),\n"
                f"6 NaN/Inf (NonFinite), 7 checkpoint does not fit (Mismatch), 130 interrupted (^C);\n"
                f"--out is written for every outcome but 2.")
    p = _Parser(prog=spec.prog, description="A campaign trial: the function of this module on one checkpoint.", epilog=examples,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, metavar="{" + ",".join(list(spec.functions) + ["serve"]) + "}")
    for kind in spec.functions:
        q = sub.add_parser(kind, help=f"run the {kind} function on a checkpoint and write its summary", epilog=examples,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        q.add_argument("--from", dest="from_ckpt", metavar="CKPT", required=True, help="the checkpoint ({ckpt})")
        q.add_argument("--out", metavar="JSON", help="the summary: the metrics, exit_code, error ({out}); written for every outcome but usage errors")
        q.add_argument("--dir", metavar="DIR", help="the trial's scratch directory ({dir})")
        q.add_argument("--trial", metavar="T", help="the trial id ({trial})")
        q.add_argument("--seed", type=_seed, help="the trial's seed ({seed})")
        q.add_argument("--arg", type=_key_value, action="append", default=[], metavar="KEY=VALUE", help="passed to the function as trial.args[KEY]")
    s = sub.add_parser("serve", help="a resident trial worker, started by ckpt-flip campaign (\"mode\": \"worker\"); stdin is its socket")
    s.add_argument("--preload", metavar="CKPT", help="the campaign's golden checkpoint (accepted; setup() loads what the trials share)")
    return p


def _parse(spec, argv):
    p = _parser(spec)
    try:
        return p.parse_args(argv)
    except SystemExit as e:  # --help
        sys.exit(e.code)


# ---------------------------------------------------------------------------------------------
# One trial: the function, its summary, its exit code.

def _one_line(e):
    text = " ".join(str(e).split())
    return text[:300] if text else type(e).__name__


def _where(e):
    """file:line of the innermost frame of an exception: the one error line says where it happened."""
    tb = traceback.extract_tb(e.__traceback__)
    return f" ({os.path.basename(tb[-1].filename)}:{tb[-1].lineno})" if tb else ""


def _call(fn, ckpt, trial):
    try:
        params = [p for p in inspect.signature(fn).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        takes_trial = len(params) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        takes_trial = True
    return fn(ckpt, trial) if takes_trial else fn(ckpt)


def _scalar(name, v):
    """A summary value as JSON takes it: numbers stay numbers (NaN and Inf included: json writes
    them as NaN, Infinity, -Infinity, which a campaign reads), numpy and torch scalars become numbers."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    item = getattr(v, "item", None)
    if callable(item):
        try:
            x = item()
        except (ValueError, RuntimeError):  # a tensor of more than one element
            x = None
        if isinstance(x, (bool, int, float)):
            return x
    raise Failure(EXIT_INTERNAL, f"the result's {name!r} is a {type(v).__name__}, not a number or a string")


def _is_surrogate(c):
    return 0xD800 <= ord(c) <= 0xDFFF


def _escaped(s):
    """A string holding bytes that are not UTF-8 (a path decoded with surrogateescape, as os.fsdecode
    and os.listdir give them) in the flip log's escaped form (docs/reference/flip-log.md): valid
    text as it is, each backslash as two, each other byte as backslash-x and two hex digits. JSON's parsers (the campaign's
    included) refuse the lone surrogates json.dumps would write for them."""
    out = []
    for c in s:
        if c == "\\":
            out.append("\\\\")
        elif 0xDC80 <= ord(c) <= 0xDCFF:
            out.append("\\x%02x" % (ord(c) - 0xDC00))
        elif _is_surrogate(c):
            out.extend("\\x%02x" % b for b in c.encode("utf-8", "surrogatepass"))
        else:
            out.append(c)
    return "".join(out)


def _readable(s):
    """Text for an error line or the summary's "error": bytes that are not UTF-8 as backslash-x-HH (unflagged:
    a message is for reading, not for getting the bytes back)."""
    if s is None or not any(_is_surrogate(c) for c in s):
        return s
    return "".join(_escaped(c) if _is_surrogate(c) else c for c in s)


def _result(fn_name, r):
    if not isinstance(r, dict):
        raise Failure(EXIT_INTERNAL, f"{fn_name} returned a {type(r).__name__}, not a dict of metrics")
    out = {}
    for k, v in r.items():
        if not isinstance(k, str):
            raise Failure(EXIT_INTERNAL, f"{fn_name} returned the key {k!r}: metric names are strings")
        if any(_is_surrogate(c) for c in k):
            raise Failure(EXIT_INTERNAL, f"{fn_name} returned the key {_readable(k)!r}, which is not UTF-8 text: metric names are text")
        if k in RESERVED:
            raise Failure(EXIT_INTERNAL, f"{fn_name} returned {k!r}, a key the summary keeps for the runner ({', '.join(RESERVED)})")
        v = _scalar(k, v)
        if isinstance(v, str) and any(_is_surrogate(c) for c in v):
            # Escaped and flagged as the flip log does ("dataset_escaped"): `k + "_escaped": true`.
            flag = k + "_escaped"
            if flag in r:
                raise Failure(EXIT_INTERNAL, f"{fn_name} returned {k!r}, which is not UTF-8 text, and {flag!r}, the key its escaped form needs")
            out[k], out[flag] = _escaped(v), True
            continue
        out[k] = v
    return out


def _failure_status(f):
    """The exit code and error line of a Failure: its code when that is an error status (1-255),
    else exit 1 (a code 0 would say success, 256 wraps to 0 in the wait status)."""
    c = f.code
    if isinstance(c, int) and 1 <= c <= 255:
        return int(c), str(f)
    return EXIT_INTERNAL, f"{f} (raised as Failure({c!r}, ...): not an error exit status 1-255, so exit 1)"


def _exit_status(c, who="the trial function"):
    """The exit code and error line of sys.exit(c) (None: no error): 0-255 as given, a message
    (sys.exit("text")) 1 as Python exits, any other number 1 (256 would wrap to 0, success)."""
    if c is None or (isinstance(c, int) and c == 0):
        return EXIT_OK, None
    if isinstance(c, int) and 1 <= c <= 255:
        return int(c), f"{who} exited with {int(c)}"
    if isinstance(c, int):
        return EXIT_INTERNAL, f"{who} exited with {c}, not an exit status 0-255, so exit 1"
    return EXIT_INTERNAL, f"{who} exited with {_one_line(c)}"


def _follow_links(path):
    """The file a write through `path` lands on: `path` unless it is a symbolic link, followed (as
    the C++ tools do: the link stays a link and its target is replaced)."""
    q = path
    for _ in range(40):
        try:
            if not stat.S_ISLNK(os.lstat(q).st_mode):
                return q
            t = os.readlink(q)
        except OSError:
            return q
        q = t if os.path.isabs(t) else os.path.join(os.path.dirname(q), t)
    raise Failure(EXIT_IO, f"{path}: a loop of symbolic links")


def _require_output(path, option=""):
    """--out must be a regular file or nothing (renaming onto a directory fails, onto a device node
    as root would replace it), in a directory that exists."""
    name = f"{option} {path}" if option else path
    target = _follow_links(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        d = os.path.dirname(target) or "."
        if not os.path.isdir(d):
            raise Failure(EXIT_IO, f"{name}: its directory {d} does not exist") from None
        return target
    except OSError as e:
        raise Failure(EXIT_IO, f"{name}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "not a regular file"
        raise Failure(EXIT_IO, f"{name}: is {kind}, not a regular file to write")
    return target


def _clear_for_new(tmp):
    """Make way for the temporary `tmp`: nothing there, or this user's own regular file with no other
    link (a temporary an earlier process with this pid left), which is removed. Anything else (a
    symbolic link, another user's file, a directory, a file with other links) is exit 3 naming it,
    left as it is: writing through it would write where whoever put it there chose."""
    try:
        st = os.lstat(tmp)
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and st.st_uid == os.geteuid():
        os.unlink(tmp)
        return
    what = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else f"another user's file (uid {st.st_uid})" if st.st_uid != os.geteuid()
            else "a directory" if stat.S_ISDIR(st.st_mode) else f"a file with {st.st_nlink} links" if stat.S_ISREG(st.st_mode)
            else "a special file")
    raise Failure(EXIT_IO, f"{tmp}: cannot write: the name {os.path.basename(tmp)} in its directory is taken by {what}, not made by "
                           f"this process: nothing written through it; remove it, or write elsewhere")


def _atomic_write(path, text):
    """Write `text` to `path` atomically, as the C++ tools write a file (ckpt::fs::write_file_atomic):
    a new temporary .NAME.tmp.PID beside it (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0644 less the umask),
    renamed over it. Failure(3) naming the path when it cannot."""
    target = _require_output(path)
    tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.tmp.{os.getpid()}")
    fd, made = None, None
    try:
        _clear_for_new(tmp)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            raise Failure(EXIT_IO, f"{tmp}: cannot write: the name {os.path.basename(tmp)} in its directory was taken while it was being "
                                   f"created: nothing written through it") from None
        made = os.fstat(fd)
        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[os.write(fd, data):]
        os.close(fd)
        fd = None
        os.replace(tmp, target)
        made = None
    except OSError as e:
        where = f" ({e.filename})" if e.filename and e.filename not in (path, target) else ""
        raise Failure(EXIT_IO, f"{path}: cannot write the summary: {e.strerror or e}{where}") from None
    finally:
        if fd is not None:
            os.close(fd)
        if made is not None:  # remove the temporary this process made, and nothing else
            try:
                st = os.lstat(tmp)
                if (st.st_dev, st.st_ino) == (made.st_dev, made.st_ino):
                    os.unlink(tmp)
            except OSError:
                pass


def _check_paths(a):
    """Before anything runs: --out may not be --from (exit 2: the summary would replace the
    checkpoint; also through a link), and must be a regular file or nothing (exit 3)."""
    if not a.out:
        return
    try:
        same = os.path.exists(a.out) and os.path.exists(a.from_ckpt) and os.path.samefile(a.out, a.from_ckpt)
    except OSError:
        same = False
    if same:
        raise Failure(EXIT_USAGE, f"--out {a.out} is the same file as --from {a.from_ckpt} (give --out a path of its own)")
    _require_output(a.out, "--out")


def _quiet_stdout():
    """stdout is gone (a closed pipe): later writes and the flush at exit go to /dev/null instead of
    raising again."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass


def _say_error(prog, text):
    try:
        print(f"{prog}: error: {_readable(text)}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def run_trial(spec, state, a, setup=False):
    """Run the function for parsed arguments `a` (with setup=True, setup() first, as a command-mode
    trial does); write --out; return the exit code."""
    try:
        _check_paths(a)
    except Failure as f:
        _say_error(spec.prog, str(f))
        return f.code
    began = time.monotonic()
    summary, code, error, nan = {}, EXIT_OK, None, False
    fn_seconds = None
    try:
        if not os.path.exists(a.from_ckpt):
            raise Failure(EXIT_IO, f"{a.from_ckpt}: no such file")
        if setup:
            state = _setup(spec)
        fn = spec.functions[a.command]
        trial = Trial(a.from_ckpt, a.command, a.dir, a.trial, a.seed, dict(a.arg), state)
        t0 = time.perf_counter()
        r = _call(fn, a.from_ckpt, trial)
        fn_seconds = time.perf_counter() - t0
        summary = _result(fn.__name__, r)
    except Failure as f:
        (code, error), nan = _failure_status(f), isinstance(f, NonFinite)
    except SystemExit as e:  # the function called sys.exit(code)
        code, error = _exit_status(e.code)
    except KeyboardInterrupt:  # ^C: the summary says so, exit 130 as a shell would report it
        code, error = EXIT_INTERRUPTED, "interrupted by SIGINT (^C)"
    except BaseException as e:  # a bug in the function or a library failure: one line, not a traceback
        code, error = EXIT_INTERNAL, f"{type(e).__name__}: {_one_line(e)}{_where(e)}"
    if nan:
        summary["nan_detected"] = True
    wall = round(time.monotonic() - began, 6)
    if not error:
        shown = ", ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}" for k, v in summary.items()
                          if k not in RESERVED and not isinstance(v, str))
        took = f" ({fn_seconds:.3f} s)" if fn_seconds is not None else ""
        line = f"{spec.prog}: {a.command} {_readable(a.from_ckpt)}: {shown}{took}"
        try:
            try:
                print(line, flush=True)
            except UnicodeEncodeError:  # a metric name stdout's encoding (an ASCII locale) cannot write
                enc = sys.stdout.encoding or "ascii"
                print(line.encode(enc, "backslashreplace").decode(enc), flush=True)
        except OSError as e:  # stdout closed (`| head -c0`): an I/O error, and the summary says so
            code, error = EXIT_IO, f"stdout: {e.strerror or e}"
            _quiet_stdout()
    error = _readable(error)
    summary.update(exit_code=code, error=error, function_seconds=fn_seconds, wall_seconds=wall)
    if a.out:
        try:
            _atomic_write(a.out, json.dumps(summary, indent=1) + "\n")  # NaN, Infinity as Python writes them
        except Failure as f:
            if code == EXIT_OK:
                code, error = f.code, str(f)
            else:  # the trial's own failure stays its exit code; the line says both
                error = f"{error}; and no summary: {f}"
    if error:
        _say_error(spec.prog, error)
    return code


def _setup(spec):
    """setup()'s value. Its failure is a Failure: its own (resil's exit code), or exit 1 naming
    "setup:" and where; sys.exit(c) in it is c's exit code, ^C KeyboardInterrupt as it is."""
    if spec.setup is None:
        return None
    try:
        return spec.setup()
    except (Failure, KeyboardInterrupt):
        raise
    except SystemExit as e:
        code, error = _exit_status(e.code, "setup()")
        raise Failure(code if code != EXIT_OK else EXIT_INTERNAL, error or "setup() called sys.exit(0) before the trial ran") from None
    except BaseException as e:
        raise Failure(EXIT_INTERNAL, f"setup: {type(e).__name__}: {_one_line(e)}{_where(e)}") from None


# ---------------------------------------------------------------------------------------------
# The resident worker (`serve`): the protocol of ckpt-train serve, trials in forked children.

_libc = None


def _pdeathsig(sig):
    """PR_SET_PDEATHSIG: the kernel sends `sig` to this process when its parent dies."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    _libc.prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG


def _subcommand_at(argv):
    """Where a request's argv has its subcommand: argv[1] (an executable trial script), or argv[2]
    after an interpreter (python3 mytrial.py eval ...): the campaign's own rule for the worker."""
    for i in (1, 2):
        if len(argv) > i and argv[i] in SUBCOMMANDS:
            return i
    return None


def _trial_child(spec, state, argv, supervisor):
    """The trial, in the grandchild of the worker: parse the request as the command line, run."""
    _pdeathsig(signal.SIGKILL)
    if os.getppid() != supervisor:
        os._exit(EXIT_INTERNAL)
    code = EXIT_INTERNAL
    try:
        i = _subcommand_at(argv)
        code = run_trial(spec, state, _parse(spec, argv[i:] if i is not None else argv[1:]))
    except Failure as f:  # a usage error in the request's argv: what the command would have said
        code, error = _failure_status(f)
        _say_error(spec.prog, error)
    except SystemExit as e:  # --help
        code = _exit_status(e.code)[0]
    except BaseException as e:
        _say_error(spec.prog, f"{type(e).__name__}: {_one_line(e)}{_where(e)}")
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        finally:
            os._exit(code)


def _supervise(spec, state, sock, status_r, status_w, worker, log, argv):
    """The first process of the trial's process group (forked by the worker). It starts the trial
    in the group and waits for it; when the worker dies in any way (kill -9 included: the kernel
    sends `death` through PR_SET_PDEATHSIG) and when the trial ends, it SIGKILLs the whole group,
    itself included, so nothing the trial started outlives it. The trial's own wait status goes to
    the worker through a pipe. A Python process blocked in waitpid runs its signal handler at once,
    which the trial (maybe deep in a torch kernel) would not."""
    try:
        os.setpgid(0, 0)
        os.close(sock)
        os.close(status_r)
        death = signal.SIGRTMIN
        signal.signal(death, lambda *_: os.killpg(0, signal.SIGKILL))
        _pdeathsig(death)
        if os.getppid() != worker:
            os.killpg(0, signal.SIGKILL)
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as e:
            os.write(2, f"{spec.prog} serve: cannot open the trial's log {log}: {e.strerror}\n".encode())
            os._exit(127)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        me = os.getpid()
        child = os.fork()
        if child == 0:
            os.close(status_w)
            signal.signal(death, signal.SIG_DFL)
            _trial_child(spec, state, argv, me)
        _, status = os.waitpid(child, 0)
        os.write(status_w, struct.pack("<i", status))
        os.killpg(0, signal.SIGKILL)  # stragglers the trial left in its group, and this process
    finally:
        os._exit(127)


def _threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _gnu_openmp_runtimes():
    """The GNU OpenMP runtimes (libgomp, or a wheel's bundled libgomp-<hash>.so) mapped in this process."""
    found = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                fields = line.split(None, 5)
                if len(fields) == 6:
                    path = fields[5].strip()
                    if os.path.basename(path).startswith("libgomp") and path not in found:
                        found.append(path)
    except OSError:
        pass
    return found


def _end_openmp_pools():
    """End the thread pool of every GNU OpenMP runtime in this process, so that forked trials start
    their own. libgomp keeps the threads of a parallel region (torch's intra-op parallelism, with
    more than one thread) for the next one; a fork copies the pool's bookkeeping but not its threads,
    and the child's first parallel region waits for them forever. omp_pause_resource_all (OpenMP
    5.0, libgomp of GCC 9 and later) joins them and frees the pool; the thread count (the ICV that
    torch.set_num_threads sets) stays, so a trial runs its parallel regions with the same threads,
    and the same numbers, as a command-mode trial. A runtime without it, with threads running, is
    exit 2 rather than trials that hang. (LLVM's libomp and Intel's libiomp5 recreate their pool in a
    forked child by themselves.)"""
    for path in _gnu_openmp_runtimes():
        pause = None
        try:
            pause = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY).omp_pause_resource_all
        except (OSError, AttributeError):
            pass
        if pause is not None:
            pause.argtypes, pause.restype = [ctypes.c_int], ctypes.c_int
            if pause(2) == 0:  # omp_pause_hard
                continue
        if _threads() > 1:
            raise Failure(EXIT_USAGE, f"serve: setup() left {_threads() - 1} thread(s) running and OpenMP's runtime {path} cannot end its "
                                      f"thread pool (no omp_pause_resource_all): a forked trial would hang at its first parallel operation; "
                                      f"do the parallel work in the trial function, or use \"mode\": \"command\"")


def _serve_stdin():
    """serve's stdin must be the campaign's socket: exit 2 otherwise (a closed stdin included),
    before setup() runs."""
    try:
        st = os.fstat(0)
    except OSError:
        st = None
    if st is None or not stat.S_ISSOCK(st.st_mode):
        what = "closed" if st is None else "not a socket"
        raise Failure(EXIT_USAGE, f"serve: stdin is {what}; the worker is started by `ckpt-flip campaign` (\"mode\": \"worker\")")


def serve(spec, state):
    """Serve trial requests on the socket at stdin until the campaign closes it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a terminal's ^C ends the worker as it ends ckpt-train serve
    _serve_stdin()
    _end_openmp_pools()
    # The socket on another descriptor: the trials see /dev/null on stdin and cannot touch the protocol.
    sock = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    if not frames.write_frame(sock, b"ready"):
        return EXIT_OK
    me = os.getpid()
    while True:
        req = frames.read_frame(sock)
        if req is None:
            return EXIT_OK  # the campaign closed the socket: done
        fields = frames.decode_strings(req)
        if not fields or len(fields) < 2:
            raise Failure(EXIT_USAGE, "serve: a malformed trial request")
        log, argv = fields[0], fields[1:]
        sys.stdout.flush()
        sys.stderr.flush()
        status_r, status_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as e:
            os.close(status_r)
            os.close(status_w)
            frames.write_frame(sock, b"F" + (e.strerror or str(e)).encode())
            continue
        if pid == 0:
            _supervise(spec, state, sock, status_r, status_w, me, log, argv)
        os.close(status_w)
        try:
            os.setpgid(pid, pid)  # also here: the campaign may kill the group as soon as it has the pid
        except OSError:
            pass
        if not frames.write_frame(sock, b"P%d" % pid):
            _kill_group(pid)
            return EXIT_OK
        # Wait for the end without reaping, so the group id cannot be reused while it is killed.
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        _kill_group(pid)
        _, status = os.waitpid(pid, 0)
        got = os.read(status_r, 4)  # the trial's status; nothing when the group was killed first (a timeout)
        os.close(status_r)
        if len(got) == 4:
            (status,) = struct.unpack("<i", got)
        if not frames.write_frame(sock, b"S%d" % status):
            return EXIT_OK


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ---------------------------------------------------------------------------------------------

def main(evaluate=None, resume=None, setup=None, argv=None):
    """The trial program: `eval` and/or `resume` run the given function on one checkpoint, `serve`
    is the resident worker. Exits with resil's exit code."""
    prog = os.path.basename(sys.argv[0]) or "trial"
    functions = {k: f for k, f in (("eval", evaluate), ("resume", resume)) if f is not None}
    if not functions:
        raise TypeError("resil.trial.main needs evaluate= or resume= (or both)")
    spec = _Spec(prog, functions, setup)
    try:
        a = _parse(spec, sys.argv[1:] if argv is None else argv)
        if a.command == "serve":
            _serve_stdin()  # before setup(): a worker that cannot serve loads nothing
            code = serve(spec, _setup(spec))
        else:
            code = run_trial(spec, None, a, setup=True)  # setup() inside: its failure has a summary too
    except Failure as f:  # a usage error, or setup() of the worker
        code, error = _failure_status(f)
        _say_error(prog, error)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
        _say_error(prog, "interrupted by SIGINT (^C)")
    except Exception as e:  # a bug of this module: one line naming where
        code = EXIT_INTERNAL
        _say_error(prog, f"internal: {type(e).__name__}: {_one_line(e)}{_where(e)}")
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        _quiet_stdout()
    sys.exit(code)
