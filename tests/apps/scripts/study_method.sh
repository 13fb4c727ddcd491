#!/bin/bash
# scripts/study/dp_vs_mp.py end to end at its smallest (--plan smoke, MLP, five arms): the golden runs,
# data-order and ulp noise, the dp model campaign, its one-replica twin (same sites, rank 1 only) and the
# bit-30 campaign; each finished arm's records are published once, gzipped, with the loss curves, the
# replica divergence, the CPU time and the fault space; the report has its sections, a two-level FIT over the exposed bits, marks the study partial and draws no verdict from a claim
# whose arms are not all complete; a second run records nothing new; a bad arm name is one error line and exit 2;
# SIGTERM stops the running campaign with the study. And what a cluster, a crash or a colleague does to a study:
# damaged or foreign published records, a smoke run aimed at the full study's records, two runs on one
# directory, kill -9 and SIGINT of the study, a torn or doubled noise record, a failed fault-free resume or
# golden run, an altered golden checkpoint, a new --dir (a new machine) continuing an unfinished arm from its
# snapshot, a golden run that does not reproduce the published one, a full or read-only filesystem, --commit
# outside the checkout, beside someone else's staged files, or stopped mid-commit.
. "$(dirname "$0")/../../support/test_lib.sh" study-method
BUILD=$1
ARMS=(noise-ulp-mlp-dp-late noise-order-mlp-dp-late mlp-dp-model-late mlp-dp1-model-late mlp-dp-model-late-bit30)
S=(/usr/bin/python3 "$SRC/scripts/study/dp_vs_mp.py")
run "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only "${ARMS[@]}"
for a in "${ARMS[@]}"; do [ -s "$T/pub/$a.jsonl.gz" ] || fail "arm $a not published"; done
[ -s "$T/pub/goldens.json" ] || fail "no goldens.json"
$PY - "$T/pub" <<'PYEOF' || fail "published records"
import gzip, json, sys
p = sys.argv[1]
def arm(n):
    with gzip.open(f"{p}/{n}.jsonl.gz", "rt") as f:
        head = json.loads(f.readline())["head"]
        return head, [json.loads(l) for l in f]
g = json.load(open(p + "/goldens.json"))
assert set(g["goldens"]) == {"mlp-dp-adam-s1"}, g["goldens"].keys()
assert g["study"] == "dp-vs-mp", g.get("study")
h, order = arm("noise-order-mlp-dp-late")
assert len(order) == 2 and len({r["shuffle_seed"] for r in order}) == 2, order
assert all(r["exit_code"] == 0 and r["summary"]["loss_curve"] for r in order), order
assert h["golden_summary"]["loss_curve"], h
_, ulp = arm("noise-ulp-mlp-dp-late")
assert all(f[3] == 0 for r in ulp for f in r["flips"]), "the ulp arm flipped another bit than 0"
h, dp = arm("mlp-dp-model-late")
# The fault space: every stored bit of the model's float32 weights, as many as the replicas compare.
assert h["space"]["total_bits"] == 32 * h["golden_summary"]["replica_divergence"]["elements"], h["space"]["total_bits"]
_, one = arm("mlp-dp1-model-late")
for r in dp:
    assert r["summary"]["replica_divergence"]["ranks_differing"] == 0, r   # the fault is in every replica
    assert r["summary"]["loss_curve"], r
sites = {r["trial"]: r["flips"] for r in dp}
for r in one:
    assert r["flips"] == sites[r["trial"]], "the one-replica arm flips other sites than the dp arm"
_, b30 = arm("mlp-dp-model-late-bit30")
assert all(f[3] == 30 and f[4] is not None for r in b30 for f in r["flips"]), b30
# What each trial and resume cost: the CPU time of its processes, which the report's budget lines sum.
assert all(r["cpu_seconds"] > 0 for r in order + ulp + dp + one + b30), [r.get("cpu_seconds") for r in order + dp]
PYEOF
run "${S[@]}" report --publish "$T/pub" --build "$(realpath "$BUILD")" --out "$T/r.md"
for s in "Partial study" "## Noise baseline" "## Campaigns: outcome classes" "## Findings" "### 1. " "### 2. " "### 3. " "### 4. " \
         "Loss-curve classes" "## Trial budget" "mlp-dp1-model-late" "## Two-level FIT" "CPU-hours over the" "CPU-s of the 2 timed trials of mlp-dp-model-late-bit30"; do
  grep -q -- "$s" "$T/r.md" || { cat "$T/r.md"; fail "the report lacks '$s'"; }
done
# The FIT row of the dp campaign: its exposed memory is the fault space, the upsets the field rate times it
# (0.01875 FIT/Mbit), and its point lies inside its interval.
$PY - "$T/pub" "$T/r.md" <<'PYEOF' || fail "the two-level FIT row"
import gzip, json, re, sys
with gzip.open(sys.argv[1] + "/mlp-dp-model-late.jsonl.gz", "rt") as f:
    mbit = json.loads(f.readline())["head"]["space"]["total_bits"] / 2 ** 20
section = open(sys.argv[2]).read().split("## Two-level FIT")[1].split("\n## ")[0]
row = next(l for l in section.splitlines() if l.startswith("| mlp-dp-model-late |"))
cells = [c.strip() for c in row.strip().strip("|").split("|")]
assert abs(float(cells[1]) - mbit) < 0.01, (cells, mbit)
assert abs(float(cells[2]) - 0.01875 * mbit) <= 0.001 * 0.01875 * mbit + 1e-3, (cells, mbit)
for c in cells[3:6]:
    point, lo, hi = map(float, re.match(r"(\S+) \[(\S+), (\S+)\]", c).groups())
    assert lo <= point <= hi, c
PYEOF
# A verdict waits for every arm its rule reads: claim 1's bit-30 arm is complete but its 10-flip arms were
# never run, so claim 1 is pending rather than drawn from the arms that exist.
grep -q 'Verdict: \*\*pending\*\* (.* arms not complete)' <<< "$(sed -n '/^### 1\. /,/^### 2\. /p' "$T/r.md")" \
  || { sed -n '/^### 1\. /,/^### 2\. /p' "$T/r.md"; fail "claim 1's verdict was drawn before all its arms completed"; }
# report --live early in a study: the running directory holds one noise record so far, a band of one draw.
mkdir -p "$T/live1/campaigns" "$T/pub-empty" && cp -r "$T/s/campaigns/noise-order-mlp-dp-late" "$T/live1/campaigns/"
sed -i '2,$d' "$T/live1/campaigns/noise-order-mlp-dp-late/records.jsonl"
run "${S[@]}" report --publish "$T/pub-empty" --live "$T/live1" --build "$(realpath "$BUILD")" --out "$T/live1.md"
grep -q "| mlp | late | 1 | .* | 0.000 |" "$T/live1.md" || { grep -n "| mlp |" "$T/live1.md"; fail "the one-draw band's confidence"; }
# A second run: every arm is complete, nothing runs, nothing is published again.
before=$(stat -c %Y "$T/pub/mlp-dp-model-late.jsonl.gz")
run "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only "${ARMS[@]}"
grep -q "campaign \|noise " "$T/stdout" && { cat "$T/stdout"; fail "a re-run ran arms again"; }
[ "$(stat -c %Y "$T/pub/mlp-dp-model-late.jsonl.gz")" = "$before" ] || fail "a re-run published again"
expect_err 2 "no-such-arm" "${S[@]}" run --plan smoke --dir "$T/s" --only no-such-arm
# Published records that are not a complete record of the plan's arm: the report and the driver refuse them
# with one line naming the file (exit 4), write nothing and leave the file as it was. A truncated or damaged
# gzip, a trial recorded twice, and the smoke plan's records in a directory of the full plan.
bad_pub() {  # a copy of the published records, with arm file $1 replaced by stdin
  rm -rf "$T/bad" && cp -r "$T/pub" "$T/bad" && cat > "$T/bad/$1.jsonl.gz"
}
refused() {  # the report and a run refuse $T/bad/$1.jsonl.gz, naming it, and leave it as it was
  local f="$T/bad/$1.jsonl.gz" before
  before=$(sha "$f")
  expect_err 4 "$f" "${S[@]}" report --publish "$T/bad" --out "$T/bad-report.md"
  [ -e "$T/bad-report.md" ] && fail "a report was written from $f"
  expect_err 4 "$f" "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/bad" --only "$1"
  [ "$(sha "$f")" = "$before" ] || fail "$f was changed"
}
head -c 300 "$T/pub/mlp-dp-model-late.jsonl.gz" | bad_pub mlp-dp-model-late; refused mlp-dp-model-late
echo "not gzip" | bad_pub mlp-dp-model-late; refused mlp-dp-model-late
zcat "$T/pub/noise-order-mlp-dp-late.jsonl.gz" | $PY -c "
import gzip, json, sys
lines = sys.stdin.read().splitlines()
head = json.loads(lines[0]); head['head']['records'] = 3
sys.stdout.buffer.write(gzip.compress('\n'.join([json.dumps(head)] + lines[1:] + lines[1:2]).encode() + b'\n'))
" | bad_pub noise-order-mlp-dp-late; refused noise-order-mlp-dp-late
cat "$T/pub/noise-ulp-mlp-dp-late.jsonl.gz" | bad_pub noise-ulp-mlp-dp-late
sed -i 's/"plan": "smoke"/"plan": "full"/' "$T/bad/goldens.json"
expect_err 4 "$T/bad/noise-ulp-mlp-dp-late.jsonl.gz" "${S[@]}" report --publish "$T/bad" --out "$T/bad-report.md"
grep -q "n=2 (the plan's: 30)" "$T/stderr" || { cat "$T/stderr"; fail "the error line does not say which of the arm's keys differ"; }
# A smoke run publishing into the full study's directory (--publish left out, say) is refused before it runs.
before=$(sha "$T/bad/goldens.json")
expect_err 2 "$T/bad/goldens.json" "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/bad" --only mlp-dp-model-late
[ "$(sha "$T/bad/goldens.json")" = "$before" ] || fail "a refused run changed goldens.json"
echo '{"plan": "smoke", "goldens": {' > "$T/bad/goldens.json"
expect_err 4 "$T/bad/goldens.json" "${S[@]}" report --publish "$T/bad" --out "$T/bad-report.md"
expect_err 2 "--publish" "${S[@]}" report --publish "$T/no-such-dir" --out "$T/bad-report.md"
# Another study's records in --publish (goldens.json names its study): the run is refused before it runs, since
# each study would rewrite the other's goldens.json, and so is the report, which would read them as its own.
mkdir -p "$T/other"
$PY -c 'import json, sys; g = json.load(open(sys.argv[1])); g["study"] = "transformer"; json.dump(g, open(sys.argv[2], "w"))' \
  "$T/pub/goldens.json" "$T/other/goldens.json"
before=$(sha "$T/other/goldens.json")
expect_err 2 "$T/other/goldens.json: --publish holds the transformer study's records, not the dp-vs-mp study's" \
  "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/other" --only mlp-dp-model-late
expect_err 2 "$T/other/goldens.json: the transformer study's records, not the dp-vs-mp study's" \
  "${S[@]}" report --publish "$T/other" --out "$T/bad-report.md"
[ "$(sha "$T/other/goldens.json")" = "$before" ] || fail "a refused run changed another study's goldens.json"
touch "$T/a-file"  # a path under a file: --dir, --out
expect_err 3 "--dir: cannot create $T/a-file" "${S[@]}" run --plan smoke --dir "$T/a-file" --publish "$T/pub" --only mlp-dp-model-late
expect_err 3 "$T/a-file/r.md" "${S[@]}" report --publish "$T/pub" --out "$T/a-file/r.md"
expect_err 2 "--live" "${S[@]}" report --publish "$T/pub" --live "$T/no-such-dir" --out "$T/bad-report.md"
mkdir -p "$T/live-full" && echo full > "$T/live-full/plan"  # the running study of another plan
expect_err 2 "--live: $T/live-full holds the 'full' plan" "${S[@]}" report --publish "$T/pub" --live "$T/live-full" --out "$T/bad-report.md"
[ -e "$T/bad-report.md" ] && fail "a refused report wrote its output"
# SIGTERM to the study (kill, a scheduler's end of job) stops its running campaign too: nothing it started runs
# on, and the next run finishes the arm.
"${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only mlp-dp-model-late-k10 \
  > "$T/term.log" 2>&1 &
driver=$!
for _ in $(seq 600); do pgrep -f "ckpt-flip campaign $T/s/" > /dev/null && break; sleep 0.1; done
pgrep -f "ckpt-flip campaign $T/s/" > /dev/null || { cat "$T/term.log"; fail "the k10 campaign never started"; }
kill -TERM "$driver"
rc=0; wait "$driver" || rc=$?
[ "$rc" = 143 ] || { cat "$T/term.log"; fail "the study ended with $rc after SIGTERM, want 143"; }
pgrep -af "ckpt-flip campaign $T/s/" && fail "the campaign outlived the study"  # the study waits for it to stop
for _ in $(seq 50); do pgrep -f "$T/s/" > /dev/null || break; sleep 0.1; done
pgrep -af "$T/s/" && fail "processes of the stopped study run on"
[ -e "$T/pub/mlp-dp-model-late-k10.jsonl.gz" ] && fail "a stopped arm was published"
run "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only mlp-dp-model-late-k10
[ -s "$T/pub/mlp-dp-model-late-k10.jsonl.gz" ] || fail "the stopped arm was not finished by the next run"
# A run of another golden's arm (mp) adds its golden run to goldens.json and keeps dp's.
run "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only noise-ulp-mlp-mp-late
$PY -c "import json, sys; g = json.load(open(sys.argv[1]))['goldens']; assert set(g) == {'mlp-dp-adam-s1', 'mlp-mp-adam-s1'}, set(g)" \
  "$T/pub/goldens.json" || fail "goldens.json lost the golden run of arms the run did not name"
# A fault-free resume of a data-order arm that fails (here its launcher is killed) is no noise sample: it is not
# recorded, the run stops with one line naming the trial and its output (exit 1), and the next run repeats it.
cat > "$T/mpiexec-kill-trial-1" <<'SHEOF'
#!/bin/bash
case " $* " in *" --shuffle-seed 2000006 "*) kill -9 $$;; esac
exec mpiexec "$@"
SHEOF
chmod +x "$T/mpiexec-kill-trial-1"
F=noise-order-mlp-mp-late
expect_err 1 "the fault-free resume 1 of $F failed (exit -9; its output: $T/s/campaigns/$F/trial-1-failed.log)" \
  "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only $F --mpiexec "$T/mpiexec-kill-trial-1"
[ "$(wc -l < "$T/s/campaigns/$F/records.jsonl")" = 1 ] || fail "the failed resume was recorded"
[ -e "$T/pub/$F.jsonl.gz" ] && fail "an arm with a failed resume was published"
run "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only $F
zcat "$T/pub/$F.jsonl.gz" | $PY -c "
import json, sys
recs = [json.loads(l) for l in sys.stdin][1:]
assert [(r['trial'], r['exit_code']) for r in recs] == [(0, 0), (1, 0)], recs" || fail "the repeated resume's records"
# SIGINT (Ctrl-C, kill -INT) stops the study and its campaign like SIGTERM: exit 130, no traceback. And a
# --jobs below 1 is refused before anything runs.
$PY - "$T" "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only mlp-dp-model-early <<'PYEOF' \
  || fail "SIGINT to the study"
import signal, subprocess, sys, time
T, cmd = sys.argv[1], sys.argv[2:]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
pat = f"ckpt-flip campaign {T}/s/configs/mlp-dp-model-early"
# The campaign's own first line: its stop handlers are in place (a process found by pgrep may not have them yet).
seen = []
for line in p.stdout:
    seen.append(line)
    if line.startswith("campaign mlp-dp-model-early: 2 trials (shard"):
        break
p.send_signal(signal.SIGINT)
out = "".join(seen) + p.communicate(timeout=60)[0]
assert p.returncode == 130 and "Traceback" not in out and "stopped by SIGINT" in out, (p.returncode, out)
time.sleep(0.5)
assert subprocess.run(["pgrep", "-f", pat], capture_output=True).returncode != 0, "the campaign outlived the study"
PYEOF
expect_err 2 "--jobs" "${S[@]}" run --plan smoke --dir "$T/s" --jobs 0
# A golden run that fails skips its arms, and the run then ends with exit 1 naming the golden's log, not 0 as if
# the study were complete (a scheduler would take it as done).
printf '#!/bin/bash\ncase " $* " in *" train "*) exit 9;; esac\nexec mpiexec "$@"\n' > "$T/mpiexec-no-train" && chmod +x "$T/mpiexec-no-train"
expect_err 1 "$T/gfail/golden/mlp-dp-adam-s1/train.log" "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" \
  --dir "$T/gfail" --publish "$T/gfail-pub" --only mlp-dp-model-late --mpiexec "$T/mpiexec-no-train"
# One run per study directory: while one runs (here held stopped), a second on the same directory is refused
# (exit 3, naming the directory and the first run's pid), `publish` is not, and the first then finishes its arm.
K=mlp-dp-model-late-k10-no30
"${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only $K > "$T/k.log" 2>&1 &
driver=$!
for _ in $(seq 600); do pgrep -f "ckpt-flip campaign $T/s/configs/$K" > /dev/null && break; sleep 0.1; done
kill -STOP "$driver"
expect_err 3 "$T/s is in use by another run of the study (pid $driver)" \
  "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only $K
run "${S[@]}" publish --plan smoke --models mlp --dir "$T/s" --publish "$T/pub" --only mlp-dp-model-late  # publish only reads D
kill -CONT "$driver"
rc=0; wait "$driver" || rc=$?
[ "$rc" = 0 ] || { cat "$T/k.log"; fail "the first run ended with $rc"; }
# Writers of one --publish take turns (two runs merging goldens.json, `publish` beside `run`): while another
# process holds the directory's lock for 3 s, `publish` says it waits, and writes only once the lock is free.
$PY -c 'import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); print("held", flush=True); time.sleep(3)' "$T/pub" > "$T/hold.log" &
holder=$!
for _ in $(seq 100); do grep -q held "$T/hold.log" 2>/dev/null && break; sleep 0.1; done
t0=$(date +%s%N)
run "${S[@]}" publish --plan smoke --models mlp --dir "$T/s" --publish "$T/pub" --only mlp-dp-model-late
waited=$(( ($(date +%s%N) - t0) / 1000000 ))
cat "$T/stdout" "$T/stderr" > "$T/wait.log"
wait "$holder"
grep -q "waiting for another writer of $T/pub" "$T/wait.log" || { cat "$T/wait.log"; fail "publish did not wait for the writer holding $T/pub"; }
[ "$waited" -ge 1500 ] || fail "publish returned after $waited ms, while the other writer held $T/pub for 3 s"
# A filesystem without flock (Lustre or NFS mounted without locks; here flock fails with ENOLCK as it does there):
# the run and `publish` go on unguarded, each saying once which directory it could not lock.
mkdir -p "$T/noflock"
cat > "$T/noflock/sitecustomize.py" <<'PYEOF'
import errno, fcntl
def flock(fd, op):
    raise OSError(errno.ENOLCK, "No locks available")
fcntl.flock = flock
PYEOF
PYTHONPATH="$T/noflock" run "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only mlp-dp-model-late
cat "$T/stdout" "$T/stderr" > "$T/noflock.log"
grep -q "warning: $T/s/lock: cannot lock (No locks available)" "$T/noflock.log" || { cat "$T/noflock.log"; fail "no warning that $T/s could not be locked"; }
[ "$(grep -c "warning: $T/pub: cannot lock (No locks available)" "$T/noflock.log")" = 1 ] || { cat "$T/noflock.log"; fail "not one warning that $T/pub could not be locked"; }
PYTHONPATH="$T/noflock" run "${S[@]}" publish --plan smoke --models mlp --dir "$T/s" --publish "$T/pub" --only mlp-dp-model-late
# kill -9 of the study stops its running campaign too (SIGTERM: it records nothing more and exits), and leaves
# no stale lock: the next run finishes the arm.
K9=mlp-dp-optimizer-late
"${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only $K9 > "$T/k9.log" 2>&1 &
driver=$!
for _ in $(seq 600); do pgrep -f "ckpt-flip campaign $T/s/configs/$K9" > /dev/null && break; sleep 0.05; done
pgrep -f "ckpt-flip campaign $T/s/configs/$K9" > /dev/null || { cat "$T/k9.log"; fail "the $K9 campaign never started"; }
kill -9 "$driver"; wait "$driver" 2> /dev/null
for _ in $(seq 100); do pgrep -f "$T/s/" > /dev/null || break; sleep 0.1; done
pgrep -af "$T/s/" && fail "processes of the study run on after its kill -9"
grep -q "stopped by SIGTERM" "$T/k9.log" || { cat "$T/k9.log"; fail "the campaign ran on after its study's kill -9"; }
run "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only $K9
# A data-order arm whose records.jsonl holds a trial twice and a torn last line (a kill mid-write): the next run
# records the torn trial on a line of its own and publishes each trial once.
O=noise-order-mlp-dp-early
run "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only $O
rm "$T/pub/$O.jsonl.gz"
r=$T/s/campaigns/$O/records.jsonl
{ sed -n 1p "$r"; sed -n 1p "$r"; sed -n 2p "$r" | head -c 40; } > "$r.new" && mv "$r.new" "$r"
run "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only $O
# The arm's golden checkpoint altered between runs: the next run of its resumes is refused (exit 7, naming the
# checkpoint) with its records untouched; restored, the arm finishes. A golden.json without the checkpoint's
# digest (written by an earlier driver) gets it on the next run.
ck=$T/s/golden/mlp-dp-adam-s1/ckpt/ckpt-step00000008.h5
drop_last() { rm "$T/pub/$O.jsonl.gz" && sed -i '$d' "$r"; }
drop_last && $PY - "$T/s/campaigns/$O/golden.json" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1])); del doc["checkpoint_sha256"]; open(sys.argv[1], "w").write(json.dumps(doc))
PYEOF
run "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only $O
grep -q checkpoint_sha256 "$T/s/campaigns/$O/golden.json" || fail "golden.json did not get the checkpoint's digest"
drop_last && cp -p "$ck" "$T/ck.h5" && printf 'Z' | dd of="$ck" bs=1 seek=$(($(stat -c %s "$ck") / 2)) conv=notrunc 2> /dev/null
before=$(sha "$r")
expect_err 7 "$ck: the golden checkpoint's bytes differ" "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only $O
[ "$(sha "$r")" = "$before" ] || fail "a refused run changed the arm's records"
cp -p "$T/ck.h5" "$ck"
run "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub" --only $O
$PY - "$SRC" "$T/pub" $K $K9 $O <<'PYEOF' || fail "records after a refused run, kill -9, a duplicate and a torn line"
import sys
sys.path.insert(0, sys.argv[1] + "/scripts/study")
import dp_vs_mp as D, plan as P
by = {a.name: a for a in P.arms("smoke", ("mlp",))}
for name in sys.argv[3:]:
    head, recs = D.read_published(f"{sys.argv[2]}/{name}.jsonl.gz", by[name])
    assert [r["trial"] for r in recs] == [0, 1], (name, [r["trial"] for r in recs])
PYEOF
# A full or read-only publish filesystem (a 64 KiB tmpfs, in a private mount namespace): each write fails with
# one line naming the file (exit 3) and leaves no file behind, half-written or temporary; a read-only --publish is
# refused before the golden runs. Where user namespaces are not allowed, this part is skipped.
if unshare -rm true 2> /dev/null; then
  unshare -rm bash -s "$T" "${S[@]}" > "$T/fs.log" 2>&1 <<'SHEOF'
T=$1; shift
M=$T/fs; mkdir -p "$M" "$M-ro"
mount -t tmpfs -o size=64k tmpfs "$M" && mount -t tmpfs -o ro,size=64k tmpfs "$M-ro" || exit 9
dd if=/dev/zero of="$M/fill" bs=4k > /dev/null 2>&1
step() { local name=$1; shift; "$@" > /dev/null 2> "$T/fs-$name.err"; echo $? > "$T/fs-$name.rc"; ls -A "$M" > "$T/fs-$name.ls"; }
step goldens "$@" publish --plan smoke --models mlp --dir "$T/s" --publish "$M" --only mlp-dp-model-late
rm "$M/fill" && cp "$T/pub/goldens.json" "$M/" && dd if=/dev/zero of="$M/fill" bs=4k > /dev/null 2>&1
step arm "$@" publish --plan smoke --models mlp --dir "$T/s" --publish "$M" --only mlp-dp-model-late
step report "$@" report --publish "$T/pub" --out "$M/r.md"
step ro "$@" run --plan smoke --models mlp --dir "$T/ro-s" --publish "$M-ro" --only mlp-dp-model-late
SHEOF
  [ $? = 0 ] || { cat "$T/fs.log"; fail "the tmpfs part did not run"; }
  for c in "goldens|$T/fs/goldens.json|fill" "arm|$T/fs/mlp-dp-model-late.jsonl.gz|fill goldens.json" \
           "report|$T/fs/r.md|fill goldens.json" "ro|--publish: cannot write to $T/fs-ro|fill goldens.json"; do
    IFS='|' read -r name word files <<< "$c"
    [ "$(cat "$T/fs-$name.rc")" = 3 ] || { cat "$T/fs-$name.err"; fail "$name on a full or read-only filesystem: exit $(cat "$T/fs-$name.rc"), want 3"; }
    [ "$(wc -l < "$T/fs-$name.err")" = 1 ] && grep -qF -- "$word" "$T/fs-$name.err" || { cat "$T/fs-$name.err"; fail "$name: not one line naming $word"; }
    [ "$(sort "$T/fs-$name.ls" | tr '\n' ' ')" = "$files " ] || { cat "$T/fs-$name.ls"; fail "$name left files behind on the full filesystem"; }
  done
  [ -e "$T/ro-s/golden" ] && fail "a run whose --publish is read-only trained its golden runs first"
else
  echo "skipped: the full and read-only filesystem checks (no user namespaces for a private tmpfs)"
fi
# A new machine, or a --dir lost: `publish` keeps an unfinished arm's trials in PUBLISH/partial/NAME.tar.gz;
# a run in a directory that has none of them trains the golden run again, checks that it gives the published
# one's numbers (goldens.json altered: exit 7 naming the golden run), restores the kept trials and runs only the
# rest; the arm's records are those of one uninterrupted run, and the snapshot goes once the arm is published.
A=mlp-dp-model-late
cp -a "$T/s" "$T/s-full" && rm -rf "$T/pub2" && cp -a "$T/pub" "$T/pub2" && rm "$T/pub2/$A.jsonl.gz"
$PY - "$T/s/campaigns/$A/results" <<'PYEOF' || fail "truncating the arm's records"
import json, os, sys
for f in os.listdir(sys.argv[1]):
    p = os.path.join(sys.argv[1], f)
    keep = [l for l in open(p) if l.strip() and json.loads(l)["trial"] < 1]
    open(p, "w").writelines(keep)
PYEOF
run "${S[@]}" publish --plan smoke --models mlp --dir "$T/s" --publish "$T/pub2" --only $A
[ -s "$T/pub2/partial/$A.tar.gz" ] || fail "publish kept no snapshot of the unfinished arm"
[ -e "$T/pub2/$A.jsonl.gz" ] && fail "an unfinished arm was published"
rm -rf "$T/s" && cp -a "$T/pub2" "$T/pub3"
$PY -c "import json, sys; p = sys.argv[1]; g = json.load(open(p)); g['goldens']['mlp-dp-adam-s1']['epochs'][0]['loss'] += 1e-9; open(p, 'w').write(json.dumps(g))" \
  "$T/pub3/goldens.json"
expect_err 7 "golden run mlp-dp-adam-s1 does not reproduce the published one at epoch 1: loss" \
  "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub3" --only $A
[ -e "$T/s/campaigns/$A/results" ] && fail "trials ran from a golden run that does not reproduce the published one"
# A snapshot is another user's file as much as ours (a shared checkout): one whose members would land outside the
# arm's directory, or are links, is refused whole (exit 4, naming it) and nothing of it is written.
for evil in traversal symlink; do
  rm -rf "$T/pub4" && cp -a "$T/pub2" "$T/pub4"
  $PY - "$T/pub4/partial/$A.tar.gz" "$evil" "$T" <<'PYEOF' || fail "writing a hostile snapshot"
import io, sys, tarfile
path, kind, t = sys.argv[1:]
with tarfile.open(path, "w:gz") as tar:
    info = tarfile.TarInfo("results/../../../evil" if kind == "traversal" else "results/shard-0-of-1.jsonl")
    if kind == "symlink":
        info.type, info.linkname = tarfile.SYMTYPE, t + "/evil"
        tar.addfile(info)
    else:
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
PYEOF
  expect_err 4 "$T/pub4/partial/$A.tar.gz: not an unfinished arm's snapshot" \
    "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub4" --only $A
  [ -e "$T/evil" ] || [ -L "$T/s/campaigns/$A/results/shard-0-of-1.jsonl" ] && fail "a $evil snapshot wrote outside the arm's directory"
done
run "${S[@]}" run --plan smoke --models mlp --build "$(realpath "$BUILD")" --dir "$T/s" --publish "$T/pub2" --only $A
grep -q "arm $A: 1 trials restored from" "$T/stdout" "$T/stderr" || { cat "$T/stdout" "$T/stderr"; fail "the kept trials were not restored"; }
[ -e "$T/pub2/partial/$A.tar.gz" ] && fail "the snapshot outlived the published arm"
$PY - "$T/pub/$A.jsonl.gz" "$T/pub2/$A.jsonl.gz" <<'PYEOF' || fail "the restored arm's records differ from one uninterrupted run's"
import gzip, json, sys
def recs(p):
    def strip(r):
        return {k: strip(v) if isinstance(v, dict) else v for k, v in r.items() if "seconds" not in k}
    return [strip(json.loads(l)) for l in gzip.open(p, "rt")]
a, b = recs(sys.argv[1]), recs(sys.argv[2])
assert a == b, (a, b)
PYEOF
rm -rf "$T/s" && mv "$T/s-full" "$T/s"
# --commit, in a checkout of its own: a --publish outside the checkout, or one git ignores, is refused up front
# (exit 2) rather than failing at each commit; a commit holds the published files only, never files someone
# else staged.
G=$T/git && mkdir -p "$G/scripts" && cp -r "$SRC/scripts/study" "$G/scripts/" && echo "/ignored/" > "$G/.gitignore"
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
git -C "$G" init -q && git -C "$G" add -A && git -C "$G" commit -qm base || fail "a git checkout for --commit"
GS=(/usr/bin/python3 "$G/scripts/study/dp_vs_mp.py" publish --plan smoke --models mlp --dir "$T/s" --only mlp-dp-model-late --commit)
EXPECT_TIMEOUT=30 expect_err 2 "outside the checkout" "${GS[@]}" --publish "$T/outside"
EXPECT_TIMEOUT=30 expect_err 2 "git ignores" "${GS[@]}" --publish "$G/ignored/pub"
echo "someone else's" > "$G/staged.txt" && git -C "$G" add staged.txt
run "${GS[@]}" --publish "$G/pub"
[ "$(git -C "$G" log --format=%s | wc -l)" = 3 ] || { git -C "$G" log --stat; fail "want two commits: goldens.json, then the arm"; }
[ "$(git -C "$G" log --format= --name-only HEAD~2..HEAD | sort | tr '\n' ' ')" = "pub/goldens.json pub/mlp-dp-model-late.jsonl.gz " ] \
  || { git -C "$G" log --stat; fail "the commits hold other files than the published ones"; }
[ "$(git -C "$G" diff --cached --name-only)" = staged.txt ] || fail "the staged file of someone else was committed or unstaged"
# SIGTERM to the study while git commits its records (a git that takes a second): git finishes, the commit is
# made and no index.lock is left in the checkout; then the study stops, exit 143.
mkdir -p "$T/slowgit" && cat > "$T/slowgit/git" <<SHEOF
#!/bin/bash
for a in "\$@"; do [ "\$a" = commit ] && { touch "$T/in-commit"; sleep 1; }; done
exec $(command -v git) "\$@"
SHEOF
chmod +x "$T/slowgit/git"
PATH="$T/slowgit:$PATH" "${GS[@]/mlp-dp-model-late/mlp-dp-model-late-bit30}" --publish "$G/pub" > "$T/git-term.log" 2>&1 &
driver=$!
for _ in $(seq 300); do [ -e "$T/in-commit" ] && break; sleep 0.05; done
[ -e "$T/in-commit" ] || { cat "$T/git-term.log"; fail "the study never committed"; }
kill -TERM "$driver"
rc=0; wait "$driver" || rc=$?
[ "$rc" = 143 ] || { cat "$T/git-term.log"; fail "the study ended with $rc after SIGTERM during a commit, want 143"; }
git -C "$G" log --format=%s > "$T/git-log" && grep -q "records of mlp-dp-model-late-bit30" "$T/git-log" \
  || { cat "$T/git-term.log"; fail "SIGTERM killed git mid-commit"; }
[ -e "$G/.git/index.lock" ] && fail "a stale index.lock was left in the checkout"
echo "study method: all checks passed"
