#!/usr/bin/env bash
# A plain install (no dev extras) takes the fast path: the one-time ONNX export works (onnx is a runtime
# dependency), then every cold recall runs on ONNX Runtime without importing torch; no third-party progress bar
# reaches the terminal. Installs this checkout (not editable, as `pip install memclaw` would) into a fresh venv.
#
#     bash benchmarks/check_fresh_install.sh [results file, default benchmarks/results/fresh-install.md]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$repo/benchmarks/results/fresh-install.md}"
tmp="$(mktemp -d /tmp/memclaw-fresh-XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MEMCLAW_HOME="$tmp/home"
git -C "$repo" archive HEAD --prefix=src/ | tar -x -C "$tmp"
python3.11 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q torch==2.13.0 2>&1 | grep -v '^WARNING: Location' || true
"$tmp/venv/bin/pip" install -q "$tmp/src" 2>&1 | grep -v '^WARNING: Location' || true
cd "$tmp"  # (not the repository: its embeddings/cache must not be found)
has() { "$tmp/venv/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$1') is None)"; }
has onnx && onnx=yes || onnx=no
has pytest && dev=yes || dev=no
start=$(date +%s.%N)
"$tmp/venv/bin/memclaw" demo >"$tmp/demo.out" 2>"$tmp/demo.err"
demo_s=$(echo "$(date +%s.%N) - $start" | bc)
walls=()
for _ in 1 2 3 4 5; do
  s=$(date +%s.%N)
  "$tmp/venv/bin/memclaw" recall "what am I allergic to" -w "$MEMCLAW_HOME/demo" >"$tmp/recall.out" 2>"$tmp/recall.err"
  walls+=("$(echo "$(date +%s.%N) - $s" | bc)")
done
"$tmp/venv/bin/python" -X importtime -m memclaw.cli.main recall "allergic" -w "$MEMCLAW_HOME/demo" \
  >/dev/null 2>"$tmp/imports.txt"
grep -qE '\| (torch|sentence_transformers)$' "$tmp/imports.txt" && torch=yes || torch=no
median=$(printf "%s\n" "${walls[@]}" | sort -n | sed -n 3p | xargs printf "%.2f")
bars=$(cat "$tmp/demo.err" "$tmp/recall.err" | grep -c -E 'Loading weights|it/s\]' || true)
warn_onnx=$(cat "$tmp/demo.err" "$tmp/recall.err" | grep -c 'pip install onnx' || true)
{
  echo "# A plain install takes the ONNX fast path"
  echo
  echo "Date: $(date -u '+%Y-%m-%d %H:%M') UTC"
  echo "Machine: $(uname -sr), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(python3.11 -V)"
  echo "Command: \`bash benchmarks/check_fresh_install.sh\` (commit $(git -C "$repo" rev-parse --short HEAD));"
  echo "load average at the end: $(cut -d' ' -f1 /proc/loadavg)"
  echo
  echo "A fresh venv, \`pip install torch==2.13.0\`, then \`pip install <this checkout>\` (no extras), MEMCLAW_HOME empty."
  echo
  echo "| check | result |"
  echo "| --- | --- |"
  echo "| onnx installed without the dev extras | $onnx |"
  echo "| dev extras absent (pytest) | $([ "$dev" = no ] && echo yes || echo no) |"
  echo "| \`memclaw demo\` (builds the workspace, exports the model to ONNX once, indexes, recalls) | ${demo_s%.*} s, exit 0 |"
  echo "| its stderr | \`$(head -c 300 "$tmp/demo.err" | tr '\n' ' ')\` |"
  echo "| warnings telling the user to \`pip install onnx\` | $warn_onnx |"
  echo "| third-party progress bars on stderr (\"Loading weights\", tqdm) | $bars |"
  echo "| cold \`memclaw recall\`, median of 5 | ${median} s |"
  echo "| torch or sentence-transformers imported by a cold recall | $torch |"
} | tee "$out"
[ "$onnx" = yes ] && [ "$torch" = no ] && [ "$bars" = 0 ] && [ "$warn_onnx" = 0 ]
