#!/bin/sh
# npm test: lint, build, typecheck, then the tests. The main typecheck is one single-threaded tsc
# (~40 CPU-s, the longest step before the tests); on two cores the lint, the build and the pages'
# typecheck run beside it instead of after it. Every step still runs and any failure fails the test.
tsc --noEmit &
typecheck=$!
biome check && tsup && tsc --noEmit -p tsconfig.page.json
steps=$?
wait "$typecheck"
types=$?
[ "$steps" -eq 0 ] && [ "$types" -eq 0 ] || exit 1
exec vitest run "$@"
