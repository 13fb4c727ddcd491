#!/bin/bash
# resil.trial as a command (tests/python/cli_trial.py), at its limits:
# the summary's temporary .NAME.tmp.PID is never written through (a planted symbolic link, a
# directory, a hard link: exit 3 naming it, left as it is; this user's own stale one is replaced);
# --out through a link replaces the link's target, --out = --from is exit 2 with the checkpoint
# untouched, --out a directory exit 3; exit codes outside 1-255 (sys.exit(256), Failure(0, ...))
# are exit 1, never 0; setup() failing in command mode still writes the summary; errors after the
# trial ran (stdout closed) are exit 3, one line; `serve` with stdin closed is exit 2 before setup()
# runs; ^C (KeyboardInterrupt, a real SIGINT) writes the summary as interrupted, exit 130; --seed
# takes decimal digits only; a result string holding a path that is not UTF-8 is escaped and
# flagged as the flip log does, so a campaign reads the summary.
. "$(dirname "$0")/../support/test_lib.sh" python-trial-cli
FLIP=$1
TRIAL=$SRC/tests/python/cli_trial.py
cd "$T" || fail "cannot enter $T"
"$PY" -c "import numpy; numpy.save('g.npy', numpy.linspace(0.5, 1.5, 64, dtype=numpy.float32))" || fail "numpy"
G_SHA=$(sha g.npy)
# field KEY FILE: a key of a summary, as JSON
field() { "$PY" -c "import json,sys; print(json.dumps(json.load(open(sys.argv[2]))[sys.argv[1]]))" "$1" "$2"; }
# with_pid SETUP CMD...: SETUP run by sh, then CMD with sh's pid (exec): a name .NAME.tmp.$$ planted
# before the trial's process exists, as an attacker who knows (or plants every) pid would
with_pid=(sh -c 'eval "$1"; shift; exec "$@"' sh)

# 1. The temporary is never written through. A symbolic link planted at .summary.json.tmp.PID:
#    exit 3 naming it, the link and its target as they were, no summary.
mkdir shared && echo "precious data" > shared/victim
expect_rc 3 "${with_pid[@]}" 'ln -s "$PWD/shared/victim" "shared/.summary.json.tmp.$$"' "$PY" "$TRIAL" eval --from g.npy --out shared/summary.json
grep -q "summary.json.tmp.*symbolic link" "$T/stderr" || fail "the error does not name the planted link: $(cat "$T/stderr")"
[ "$(cat shared/victim)" = "precious data" ] || fail "the summary was written through a planted link"
[ -L shared/.summary.json.tmp.* ] || fail "the planted link was removed"
[ ! -e shared/summary.json ] || fail "a summary was written beside a planted link"
rm -f shared/.summary.json.tmp.*
#    A directory at the name: exit 3, one line (not "setup: IsADirectoryError", exit 1).
expect_err 3 "taken by a directory" "${with_pid[@]}" 'mkdir "shared/.summary.json.tmp.$$"' "$PY" "$TRIAL" eval --from g.npy --out shared/summary.json
rm -rf shared/.summary.json.tmp.*
#    A second link to another file: refused, that file unchanged.
expect_err 3 "2 links" "${with_pid[@]}" 'ln shared/victim "shared/.summary.json.tmp.$$"' "$PY" "$TRIAL" eval --from g.npy --out shared/summary.json
[ "$(cat shared/victim)" = "precious data" ] || fail "the summary was written through a hard link"
rm -f shared/.summary.json.tmp.*
#    This user's own stale temporary (an earlier process with the same pid): replaced, exit 0, and
#    the new summary is 0644 less the umask, no temporary left.
expect_rc 0 "${with_pid[@]}" 'echo stale > "shared/.summary.json.tmp.$$"' "$PY" "$TRIAL" eval --from g.npy --out shared/summary.json
[ "$(field exit_code shared/summary.json)" = 0 ] || fail "no summary after a stale temporary"
[ -z "$(ls -A shared | grep tmp)" ] || fail "a temporary was left: $(ls -A shared)"
[ "$(stat -c %a shared/summary.json)" = "$(printf '%o' $((0644 & ~$(umask))))" ] || fail "summary mode $(stat -c %a shared/summary.json)"

# 2. --out through a symbolic link: the link stays, its target gets the summary.
echo "{}" > shared/real.json && ln -s real.json shared/link.json
run "$PY" "$TRIAL" eval --from g.npy --out shared/link.json
[ -L shared/link.json ] && [ "$(field exit_code shared/real.json)" = 0 ] || fail "--out through a link: $(ls -l shared)"
#    --out = --from (also through a symbolic or hard link): exit 2, the checkpoint untouched, no summary.
expect_err 2 "same file" "$PY" "$TRIAL" eval --from g.npy --out g.npy
ln -s g.npy g-link.npy && ln g.npy g-hard.npy
expect_err 2 "same file" "$PY" "$TRIAL" eval --from g.npy --out g-link.npy
expect_err 2 "same file" "$PY" "$TRIAL" eval --from g-hard.npy --out g.npy
[ "$(sha g.npy)" = "$G_SHA" ] || fail "--out = --from replaced the checkpoint"
#    --out a directory: exit 3 naming it.
mkdir outdir
expect_err 3 "outdir" "$PY" "$TRIAL" eval --from g.npy --out outdir

# 3. Exit codes outside 1-255 are exit 1 (256 would wrap to 0: success), in the summary as well.
for m in exit256 exit-1 fail0 fail300; do
  expect_rc 1 "$PY" "$TRIAL" eval --from g.npy --out s.json --arg mode=$m
  [ "$(field exit_code s.json)" = 1 ] || fail "mode $m: summary exit_code $(field exit_code s.json)"
done
expect_rc 3 "$PY" "$TRIAL" eval --from g.npy --out s.json --arg mode=exit3
[ "$(field exit_code s.json)" = 3 ] || fail "sys.exit(3): summary exit_code $(field exit_code s.json)"

# 4. setup() failing in command mode: its exit code, one line, and the summary written.
rm -f s.json
CLI_SETUP=fail expect_err 4 "test data is missing" "$PY" "$TRIAL" eval --from g.npy --out s.json
[ "$(field exit_code s.json)" = 4 ] && [ "$(field error s.json)" = '"the test data is missing"' ] || fail "setup LoadFailure: $(cat s.json)"
rm -f s.json
CLI_SETUP=crash expect_err 1 "setup: KeyError" "$PY" "$TRIAL" eval --from g.npy --out s.json
[ "$(field exit_code s.json)" = 1 ] || fail "setup exception: no summary"
rm -f s.json
CLI_SETUP=exit256 expect_rc 1 "$PY" "$TRIAL" eval --from g.npy --out s.json
[ "$(field exit_code s.json)" = 1 ] || fail "sys.exit(256) in setup: $(cat s.json)"

# 5. After the trial ran: stdout closed is an I/O error, exit 3, one line, the summary says 3.
"$PY" "$TRIAL" eval --from g.npy --out s.json 2> err | head -c0; rc=${PIPESTATUS[0]}
[ "$rc" = 3 ] && [ "$(wc -l < err)" = 1 ] && grep -q "stdout: Broken pipe" err || fail "stdout closed: exit $rc, $(cat err)"
[ "$(field exit_code s.json)" = 3 ] || fail "stdout closed: summary exit_code $(field exit_code s.json)"

# 6. serve with stdin closed (or not a socket): exit 2, before setup() runs.
CLI_SETUP_MARK=$T/mark expect_err 2 "stdin is closed" "$PY" "$TRIAL" serve <&-
CLI_SETUP_MARK=$T/mark expect_err 2 "not a socket" "$PY" "$TRIAL" serve < /dev/null
[ ! -e mark ] || fail "serve ran setup() before finding it cannot serve"

# 7. ^C: KeyboardInterrupt in the function, and a real SIGINT in the function and in setup(): the
#    summary says interrupted, exit 130, one line.
expect_err 130 "interrupted" "$PY" "$TRIAL" eval --from g.npy --out s.json --arg mode=kbint
[ "$(field exit_code s.json)" = 130 ] || fail "KeyboardInterrupt: summary $(cat s.json)"
"$PY" - "$PY" "$TRIAL" <<'PYEOF' || fail "SIGINT"
import json, os, signal, subprocess, sys, time
for env, args in (({}, ["--arg", "mode=sleep"]), ({"CLI_SETUP": "sleep"}, [])):
    if os.path.exists("si.json"):
        os.unlink("si.json")
    p = subprocess.Popen([sys.argv[1], sys.argv[2], "eval", "--from", "g.npy", "--out", "si.json"] + args,
                         env=dict(os.environ, **env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)  # numpy imported, in the function (or setup) by now
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    s = json.load(open("si.json"))
    assert p.returncode == 130 and s["exit_code"] == 130 and "interrupted" in s["error"], (env, p.returncode, s, err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
PYEOF

# 8. --seed: decimal digits in [0, 2^64-1] only, a clear error otherwise.
run "$PY" "$TRIAL" eval --from g.npy --out s.json --seed 18446744073709551615
[ "$(field seed s.json)" = 18446744073709551615 ] || fail "--seed 2^64-1"
for s in " 0x_1" 0x10 1_0 -1 +5 "" 18446744073709551616; do
  expect_err 2 "argument --seed" "$PY" "$TRIAL" eval --from g.npy --seed "$s"
  grep -q "invalid _seed value" "$T/stderr" && fail "--seed '$s': $(cat "$T/stderr")"
done

# 9. A path that is not UTF-8 in a result string: escaped and flagged (\xHH, "<key>_escaped": true),
#    the summary strict JSON (no lone surrogates), and the bytes come back; a key already taken by
#    the function is exit 1. A campaign in such a directory reads the summaries.
D=$(printf 'dir-\xff')
mkdir "$D" && cp g.npy "$D/g.npy"
run "$PY" "$TRIAL" eval --from "$D/g.npy" --out s.json --arg mode=path
"$PY" - "$D/g.npy" <<'PYEOF' || fail "the escaped path in the summary"
import json, os, re, sys
text = open("s.json", "rb").read()
assert not re.search(rb"\\u[dD][89a-fA-F]", text), text  # no surrogate escapes: nlohmann refuses them
s = json.loads(text)
assert s["evaluated_escaped"] is True, s
esc = s["evaluated"]
raw = re.sub(r"\\(\\|x([0-9a-f]{2}))", lambda m: "\\" if m.group(1) == "\\" else chr(0xDC00 + int(m.group(2), 16)), esc)
assert os.fsencode(raw) == os.fsencode(sys.argv[1]), (esc, sys.argv[1])
PYEOF
expect_err 1 "evaluated_escaped" "$PY" "$TRIAL" eval --from "$D/g.npy" --out s.json --arg mode=badkey
expect_err 3 "no such file" "$PY" "$TRIAL" eval --from "$D/missing.npy" --out s.json
"$PY" -c "import json; s = json.load(open('s.json')); assert s['exit_code'] == 3 and '\\\\xff' in s['error'], s" || fail "the error with a non-UTF-8 path"
# The campaign's configuration is JSON (UTF-8): its checkpoint here, its output in the directory.
printf '%s\n' '{"name": "cli", "checkpoint": "'"$T"'/g.npy", "trials": 2, "seed": 3, "timeout_s": 60,' \
  ' "command": ["'"$PY"'", "'"$TRIAL"'", "eval", "--from", "{ckpt}", "--out", "{out}", "--arg", "mode=path"],' \
  ' "inject": {"flips": 1, "strata": "field"}, "metrics": [{"name": "accuracy", "tolerance": 0.01}]}' > c.json
run "$FLIP" campaign c.json --out "$D/out" --jobs 1
"$PY" -c "import json,sys; g = json.load(open(sys.argv[1])); assert g['summary']['evaluated_escaped'] is True, g" "$D/out/golden.json" \
  || fail "the golden summary"
[ "$(cat "$D"/out/results/*.jsonl | wc -l)" = 2 ] || fail "the campaign's records: $(cat "$D"/out/results/*.jsonl)"
echo "python trial cli: all checks passed"
