#!/bin/bash
# The model-based randomized pull test (tests/pull_model.py): seeded
# operations on a job's artifacts on the host (written, changed in place,
# appended to, cut, removed) and pulls, some killed at a random moment;
# no file under runs/ is ever torn, and a clean pull converges on the
# host's files with no part file left. A fixed set of seeds here;
#   PULL_MODEL_SEEDS=A-B PULL_MODEL_STEPS=N  (defaults: 1-4, 14)
. "$(dirname "$0")/../lib.sh"

test_expect_success "pull model, seeds ${PULL_MODEL_SEEDS:-1-4}" '
	python3 "$TOP/tests/pull_model.py" --gpurun "$GPURUN" --work "$TRASH/work" \
		--seeds "${PULL_MODEL_SEEDS:-1-4}" --steps "${PULL_MODEL_STEPS:-14}" >"$TRASH/model.log" 2>&1;
	rc=$?; cat "$TRASH/model.log"; test $rc = 0
'
test_done
