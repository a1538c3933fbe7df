#!/usr/bin/env bash
# Fuzzes redlock-core on stable Rust: installs cargo-fuzz if missing, builds every target in
# fuzz/ (release, debug assertions on, no sanitizer), and runs each for FUZZ_SECONDS (default
# 60) on a copy of its checked-in seed corpus, so the repository is never written to.
#
#   bash .ci/fuzz.sh                      # every target, 60 s each
#   FUZZ_SECONDS=300 bash .ci/fuzz.sh     # longer
#   bash .ci/fuzz.sh resp_decode          # some targets only
#
# Prints each target's executions ("executions: N") and libFuzzer's final stats. On a crash,
# timeout or out-of-memory it prints the panic, the input as hex, and the command to replay
# it, and exits non-zero once every target has run. Nothing here is needed by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

secs="${FUZZ_SECONDS:-60}"
start=$(date +%s)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
echo "== $(cargo fuzz --version)"

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi

# -s none: no sanitizer, so stable rustc suffices (ASan would need RUSTC_BOOTSTRAP=1).
# -a: debug assertions, so the core's debug_assert!s and overflow checks run too.
flags=(-s none -a)
echo "== building ${targets[*]}"
cargo fuzz build "${flags[@]}"
built=$(date +%s)

work="$(mktemp -d "${TMPDIR:-/tmp}/redlock-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
failed=()
for target in "${targets[@]}"; do
    corpus="$work/corpus/$target"
    artifacts="$work/artifacts/$target/"
    mkdir -p "$corpus" "$artifacts"
    if [ -d "corpus/$target" ]; then
        cp -R "corpus/$target/." "$corpus/"
    fi
    log="$work/$target.log"
    echo "== fuzzing $target for ${secs}s ($(find "$corpus" -type f | wc -l) seeds)"
    status=0
    cargo fuzz run "${flags[@]}" "$target" "$corpus" -- \
        -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$artifacts" >"$log" 2>&1 || status=$?
    # libFuzzer's last status line ("#N DONE ..." or the line before a crash) and totals.
    grep -E '^#[0-9]+' "$log" | tail -n 1 || true
    grep -E '^Done [0-9]+ runs|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' \
        "$log" || true
    execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
    if [ -z "$execs" ]; then
        execs=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | sed -E 's/^#([0-9]+).*/\1/' || true)
    fi
    echo "$target: executions: ${execs:-unknown}, exit status $status"
    if [ "$status" -ne 0 ]; then
        failed+=("$target")
        echo "!! $target failed; the end of its log:"
        grep -v '# Uses:' "$log" | grep -E -B2 -A20 'panicked at|ERROR: libFuzzer|SUMMARY' \
            | head -n 60 || tail -n 40 "$log"
        for input in "$artifacts"*; do
            [ -f "$input" ] || continue
            echo "!! input $(basename "$input") ($(wc -c <"$input") bytes), hex:"
            od -An -tx1 -v "$input"
            echo "!! base64: $(base64 -w0 "$input")"
            echo "!! replay: save it as fuzz/artifacts/$target/$(basename "$input"), then"
            echo "!!   cd fuzz && cargo fuzz run ${flags[*]} $target artifacts/$target/$(basename "$input")"
            echo "!!   (FUZZ_TRACE=1 prints each step of client_inputs)"
        done
    fi
done

end=$(date +%s)
echo "== wall time: $((end - start)) s ($((built - start)) s install and build, $((end - built)) s fuzzing)"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "== FAILED: ${failed[*]}"
    exit 1
fi
echo "== ${#targets[@]} fuzz targets ran ${secs}s each without a failure"
