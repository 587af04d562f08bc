#!/usr/bin/env bash
# CI step: PennyLane v0.45.1's own torch-interface tests on qhybrid.tensornet (../shared/pl-torch-tests, read-only
# beside the clone; its README says what it holds), with the project's expected failures deselected. Every test
# listed in .ci/pl_torch_expected_failures.txt ("ID  # reason" a line, "#" lines are comments) is passed as
# --deselect; any other failure fails CI. About 50 s on one idle core.
#   usage: .ci/pl_torch_tests.sh [extra pytest args]      (PL_TORCH_TESTS: the suite's folder, if not ../shared/...)
set -euo pipefail
cd "$(dirname "$0")/.."
suite="${PL_TORCH_TESTS:-../shared/pl-torch-tests}"
list=.ci/pl_torch_expected_failures.txt
args=()
while IFS= read -r line || [[ -n "$line" ]]; do
    id="${line%%#*}"                      # the reason after "#" is for people
    id="${id//[[:space:]]/}"
    [[ -z "$id" ]] && continue
    if [[ "$line" != *"#"* ]]; then
        echo "$list: '$id' has no reason (write it after '#')" >&2
        exit 2
    fi
    args+=(--deselect "$id")
done < "$list"
echo "== PennyLane torch-interface tests, $(( ${#args[@]} / 2 )) expected failures deselected ($list)"
bash "$suite/run.sh" "${args[@]}" "$@"
