#!/usr/bin/env bash
# The checks to run when a CUDA machine is lent, in one call of at most 8 minutes:
#   1. the tests marked for CUDA (needs_cuda: they skip, saying why, where torch sees no GPU);
#   2. the batched step against single runs on the device (benchmarks/bench_seeds.py, eager, fp16 and bf16);
#   3. the paper preset's two tasks, each as a group of 8 seeds (0-7), in fp16 with the loss scale (the
#      authors' precision, which this CPU cannot run at speed) and in bf16: 4 groups, one train_runs call;
#      SHORTENED to fit the 8 minutes: train.steps=$STEPS (default 300 of the preset's 6,750, warm-up scaled
#      alike), evaluation every 50 steps on the preset's 2,400 rows, the full test set at the end; eager,
#      since compiling the group step cold takes minutes. On an H200 (2026-12-04) a group of 8 trained at
#      about 5 steps/s a member, so 600 steps reached only the first two of the four groups in 240 s;
#   4. steps/s per member and per group (evaluations excluded) against this CPU's figure ($CPU_STEPS_PER_S:
#      10.6 steps/s, bf16 compiled, one thread, evaluations excluded; docs/results.md);
#   5. the length curve and the scores of seed 0 of each task (bf16) on the device.
# Every stage has a time limit that keeps the whole under $BUDGET_S seconds (default 460); a stage cut
# short says so in the summary, and the runs it leaves resume.
#
#   benchmarks/device_check.sh [--tiny] [OUT]     OUT defaults to $OUT, else ./device_out
#
# Where a group's time goes (data, dropout bits, AdamW, checkpoints), as a separate call when time allows:
#   python3 benchmarks/profile_group.py --device cuda --sizes 1,8 --steps 150
#
# --tiny runs the same stages on this CPU with a tiny model, 2 seeds and 20 steps, in about a minute
# (tests/integration/train_group/test_device_check.py runs it). What comes back under OUT: device_check.log,
# summary.md, summary.json, tests.log, bench.txt, env.txt (the run directories stay in $WORK, default
# /tmp/possym_device_check, as they are too many files to send back).
set -uo pipefail

TINY=0
if [[ "${1:-}" == "--tiny" ]]; then TINY=1; shift; fi
OUT_DIR=${1:-${OUT:-./device_out}}
PY=${PYTHON:-python3}
WORK=${WORK:-/tmp/possym_device_check}
BUDGET_S=${BUDGET_S:-460}
CPU_STEPS_PER_S=${CPU_STEPS_PER_S:-10.6}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$OUT_DIR" "$WORK"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
rm -rf "$WORK/runs"
LOG="$OUT_DIR/device_check.log"
: >"$LOG"
START=$SECONDS
STAGES="$OUT_DIR/.stages"
: >"$STAGES"

if [[ $TINY == 1 ]]; then
  DEVICE=cpu SEEDS=${SEEDS:-2} STEPS=${STEPS:-20} EVERY=10
  MODEL="model.n_layers=2 model.d_model=16 model.d_mlp=32 task.n_train=4000 task.n_val=200 task.n_test=200 train.eval_size=100 train.threads=1"
  BENCH="--tiny"
  LENGTH="lengthgen.grid=[0,10] lengthgen.n=20 lengthgen.n_prefixes=2"
  SCORE="score.n_inputs=8"
else
  DEVICE=cuda SEEDS=${SEEDS:-8} STEPS=${STEPS:-300} EVERY=50
  MODEL=""
  BENCH="--device cuda --eager --sizes 1,8 --steps 10 --repeats 3"
  LENGTH=""
  SCORE="score.n_inputs=100"
fi
WARMUP=$(( STEPS / 9 > 1 ? STEPS / 9 : 1 ))  # the preset's 750 of 6,750

# stage NAME LIMIT_S FUNCTION: run the (exported) function with the smaller of LIMIT_S and what the budget has left; log its end.
stage() {
  local name=$1 limit=$2; shift 2
  local left=$(( BUDGET_S - (SECONDS - START) ))
  (( limit > left )) && limit=$left
  if (( limit < 5 )); then
    echo "$name skipped 0 no time left" >>"$STAGES"; echo "== $name: skipped, no time left" | tee -a "$LOG"; return
  fi
  echo "== $name (limit ${limit}s)" | tee -a "$LOG"
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" bash -c "$1" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  local status=ok
  (( rc == 124 || rc == 137 )) && status=cut_short
  (( rc != 0 && rc != 124 && rc != 137 )) && status=failed
  echo "$name $status $(( SECONDS - t0 )) rc=$rc" >>"$STAGES"
  echo "== $name: $status after $(( SECONDS - t0 ))s (rc=$rc)" | tee -a "$LOG"
}

env_report() {
  { date -u; uname -a; nvidia-smi 2>/dev/null || echo "no nvidia-smi"
    "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"; } >"$OUT_DIR/env.txt" 2>&1
  cat "$OUT_DIR/env.txt"
}

cuda_tests() {
  "$PY" -m pytest -q -rs -p no:cacheprovider -k cuda tests/unit/test_devices.py tests/unit/train/test_group.py \
    2>&1 | tee "$OUT_DIR/tests.log"
}

bench() {
  for precision in bf16 fp16; do
    "$PY" benchmarks/bench_seeds.py $BENCH --precision $precision
  done 2>&1 | tee "$OUT_DIR/bench.txt"
}

train_groups() {
  "$PY" - "$WORK/runs" "$DEVICE" "$SEEDS" "$STEPS" "$WARMUP" "$EVERY" $MODEL <<'EOF'
import sys
import possym
out, device, seeds, steps, warmup, every, *model = sys.argv[1:]
configs, outs = [], []
for task in ("number", "letter"):
    for precision in ("fp16", "bf16"):
        for s in range(int(seeds)):
            configs.append(possym.load_config(task, "paper", [
                *model, f"train.device={device}", f"train.precision={precision}", f"train.steps={steps}",
                f"train.warmup_steps={warmup}", f"train.eval_every={every}", f"train.checkpoint_every={every}",
                f"train.state_every={every}", *(f"seeds.{k}={s}" for k in ("data", "init", "order", "dropout"))]))
            outs.append(f"{out}/{task}-{precision}/seed{s}")
possym.train_models(configs, outs, monitor=False, progress=False)
EOF
}

analyses() {
  for task in number letter; do
    run="$WORK/runs/$task-bf16/seed0"
    [[ -f $run/best.json ]] || { echo "no finished run at $run"; continue; }
    "$PY" -m possym lengthgen "$run" --no-figures "lengthgen.device=$DEVICE" $LENGTH || return 1
    "$PY" -m possym score "$run" "score.steps=[$STEPS]" score.figures=false score.frequency=false \
      "score.device=$DEVICE" $SCORE || return 1
  done
}

export PY WORK DEVICE SEEDS STEPS WARMUP EVERY MODEL BENCH LENGTH SCORE OUT_DIR TINY
export -f env_report cuda_tests bench train_groups analyses
stage environment 30 env_report
stage cuda_tests 90 cuda_tests
stage bench 100 bench
stage train 300 train_groups
stage analyses 90 analyses

"$PY" - "$WORK/runs" "$OUT_DIR" "$CPU_STEPS_PER_S" "$STAGES" "$TINY" <<'EOF' 2>&1 | tee -a "$LOG"
"""The summary: per group, its members' steps/s with evaluations excluded (from their own metrics logs),
the group's member-steps/s, the ratio to this CPU's figure, test accuracy; each stage's outcome."""
import json
import statistics
import sys
from pathlib import Path

runs, out, cpu, stages, tiny = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), Path(sys.argv[4]), sys.argv[5]
rows = []
for group in sorted(p for p in runs.glob("*") if p.is_dir()):
    members = sorted(p for p in group.glob("seed*") if (p / "metrics.jsonl").is_file())
    if not members:
        continue
    logs = [[json.loads(line) for line in (m / "metrics.jsonl").read_text().splitlines() if line.strip()]
            for m in members]
    evals = [[r for r in log if r.get("event") == "eval"] for log in logs]
    accs = [r["accuracy"] for log in logs for r in log if r.get("event") == "final"]
    first = evals[0]
    rate = float("nan")
    if len(first) >= 2:
        # The members step together, so the group's wall time between its first and last evaluation is
        # its steps plus every member's evaluations (each logs its share of a stacked evaluation).
        evaluating = sum(r.get("eval_s", 0) for ev in evals for r in ev if first[0]["step"] < r["step"] <= first[-1]["step"])
        seconds = first[-1]["time"] - first[0]["time"] - evaluating
        rate = (first[-1]["step"] - first[0]["step"]) / seconds if seconds > 0 else float("nan")
    rows.append({"group": group.name, "members": len(members), "steps_done": min(ev[-1]["step"] if ev else 0
                                                                                 for ev in evals),
                 "finished": len(accs), "member_steps_per_s": rate, "group_member_steps_per_s": rate * len(members),
                 "ratio_to_cpu_single": rate * len(members) / cpu,
                 "test_accuracy_mean": statistics.fmean(accs) if accs else None})
outcomes = [line.split(maxsplit=3) for line in stages.read_text().splitlines() if line.strip()]
summary = {"tiny": tiny == "1", "cpu_steps_per_s": cpu, "groups": rows,
           "stages": [{"stage": o[0], "status": o[1], "seconds": int(o[2]), "note": o[3] if len(o) > 3 else ""}
                      for o in outcomes]}
(out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
lines = ["# device_check summary" + (" (tiny, on the CPU)" if tiny == "1" else ""), "",
         f"CPU figure: {cpu} steps/s (paper model, bf16 compiled, one thread, evaluations excluded)", "",
         "| group | members | steps | finished | steps/s a member | member-steps/s | x CPU single | test acc |",
         "|---|---|---|---|---|---|---|---|"]
for r in rows:
    acc = "" if r["test_accuracy_mean"] is None else f"{r['test_accuracy_mean']:.3f}"
    lines.append(f"| {r['group']} | {r['members']} | {r['steps_done']} | {r['finished']} | "
                 f"{r['member_steps_per_s']:.2f} | {r['group_member_steps_per_s']:.1f} | "
                 f"{r['ratio_to_cpu_single']:.2f} | {acc} |")
lines += ["", "| stage | status | seconds |", "|---|---|---|"]
lines += [f"| {s['stage']} | {s['status']} | {s['seconds']} |" for s in summary["stages"]]
(out / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
rm -f "$STAGES"
echo "device_check: $(( SECONDS - START ))s in all; results in $OUT_DIR"
