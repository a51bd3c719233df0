#!/usr/bin/env bash
# The CLI from a shell script, as a user's deploy script would use it. Needs: NODE (Node 24),
# CP_API_URL, CP_API_KEY, NAME (a fresh deployment name), K8S_LISTENER (a k8s listener id: its
# revisions wait for an agent that never comes, so a timeout can be shown).
set -uo pipefail
cd "$(dirname "$0")/../.."
cli() { "$NODE" cli/main.ts "$@"; }
json() { "$NODE" -e 'const o = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(process.argv[1].split(".").reduce((v, k) => v?.[k], o) ?? "")' "$1"; }
fail() { echo "FAILED: $*" >&2; exit 1; }
expect_code() { [ "$1" -eq "$2" ] || fail "$3: exit code $1, expected $2"; }

# 1. create and wait
out=$(cli deploy --name "$NAME" --image-uri registry.example.com/acme/agent:1 --secret OPENAI_API_KEY=sk-1 --json); code=$?
expect_code $code 0 "first deploy"
[ "$(echo "$out" | json outcome)" = deployed ] || fail "first deploy: $out"
[ "$(echo "$out" | json action)" = created ] || fail "first deploy did not create: $out"
deployment=$(echo "$out" | json deployment_id)
first_revision=$(echo "$out" | json revision_id)
echo "created $deployment, revision $first_revision DEPLOYED"

# 2. the same name again: a PATCH of the same deployment, a new revision
out=$(CP_IMAGE_URI=registry.example.com/acme/agent:2 cli deploy --name "$NAME" --json); code=$?
expect_code $code 0 "second deploy"
[ "$(echo "$out" | json deployment_id)" = "$deployment" ] || fail "second deploy used another deployment: $out"
[ "$(echo "$out" | json action)" = patched ] || fail "second deploy did not patch: $out"
[ "$(echo "$out" | json revision_id)" != "$first_revision" ] || fail "second deploy made no new revision"

# 3. status
out=$(cli status --name "$NAME" --json); code=$?
expect_code $code 0 "status"
[ "$(echo "$out" | json revision.status)" = DEPLOYED ] || fail "status: $out"

# 4. a failing revision: exit 1 with the reason
out=$(cli deploy --name "$NAME" --image-uri registry.example.com/acme/agent:3 --secret SANDBOX_FAIL_STAGE=deploy --json 2>/dev/null); code=$?
expect_code $code 1 "failing deploy"
[ "$(echo "$out" | json status)" = DEPLOY_FAILED ] || fail "failing deploy: $out"
echo "$out" | json reason | grep -q 'SANDBOX_FAIL_STAGE=deploy' || fail "no reason: $out"

# 5. --no-wait, then wait for it
out=$(cli deploy --name "$NAME" --image-uri registry.example.com/acme/agent:4 --secrets 'OPENAI_API_KEY=sk-2' --no-wait --json); code=$?
expect_code $code 0 "no-wait deploy"
[ "$(echo "$out" | json outcome)" = not-waited ] || fail "no-wait: $out"
revision=$(echo "$out" | json revision_id)
cli wait --deployment-id "$deployment" --revision-id "$revision" >/dev/null 2>&1; code=$?
expect_code $code 0 "wait"

# 6. bad usage: exit 2
cli deploy --name "$NAME" 2>/dev/null; expect_code $? 2 "deploy without source"
cli deploy --name "$NAME" --image-uri x --colour blue 2>/dev/null; expect_code $? 2 "unknown flag"
cli launch 2>/dev/null; expect_code $? 2 "unknown command"

# 7. timeout: exit 3 (a k8s listener's revision waits for its agent)
cli deploy --name "$NAME-k8s" --image-uri x --listener-id "$K8S_LISTENER" --wait-timeout 1s >/dev/null 2>&1; expect_code $? 3 "timeout"

# 8. API unreachable: exit 4
CP_API_URL=http://127.0.0.1:9 cli status --name "$NAME" --retries 0 2>/dev/null; expect_code $? 4 "unreachable"

echo "ALL OK"
