#!/bin/bash
# OpenAI's official Node client (npm "openai", pinned) against a running
# `halformer serve` of the translator: tests/openai_client.mjs.
#   check_openai.sh HALFORMER_BINARY MODEL_DIR CACHE_DIR [chat]
# chat: MODEL_DIR is a decoder with a chat template; tests/openai_chat_client.mjs
# runs chat.completions against it instead.
# tools: MODEL_DIR is tests/fixtures/hf/qwen2_tools; tests/openai_tools_client.mjs
# runs a tool call's round trip against it.
# secure: the server runs with API keys (--api-key-file, $HALFORMER_API_KEY)
# over HTTPS (the fixture certificate, which node is told to trust);
# tests/openai_secure_client.mjs checks that the right keys answer and a
# wrong one, none, or plain http are refused.
# The client is installed once into CACHE_DIR. Without node or npm, or where
# the npm registry cannot be reached, the test is skipped (exit 77) and says so.
set -euo pipefail
exe=$1 model=$2 cache=$3 mode=${4:-}
client=openai_client.mjs name=en-de
[ "$mode" = chat ] && client=openai_chat_client.mjs name=chat
[ "$mode" = secure ] && client=openai_secure_client.mjs
[ "$mode" = tools ] && client=openai_tools_client.mjs name=tools
here=$(cd "$(dirname "$0")" && pwd)
OPENAI_VERSION=5.23.2
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "SKIPPED: node and npm are needed for OpenAI's client (apt-get install nodejs npm)"
    exit 77
fi
if [ ! -f "$cache/node_modules/openai/package.json" ] ||
   ! grep -q "\"version\": \"$OPENAI_VERSION\"" "$cache/node_modules/openai/package.json"; then
    mkdir -p "$cache"
    if ! (cd "$cache" && timeout 300 npm install --no-audit --no-fund --no-save --loglevel=error \
            "openai@$OPENAI_VERSION" >npm.log 2>&1); then
        echo "SKIPPED: npm could not install openai@$OPENAI_VERSION (offline?):"
        tail -5 "$cache/npm.log"
        exit 77
    fi
fi
cp "$here/$client" "$here/openai_check.mjs" "$cache/"  # resolves "openai" from $cache/node_modules
log=$(mktemp)
keys=$(mktemp)
extra=() scheme=http
if [ "$mode" = secure ]; then
    printf '# the keys of this test\nfile-key-1\n\n  file-key-2  \n' >"$keys"
    extra=(--api-key-file "$keys" --ssl-cert "$here/fixtures/tls/cert.pem" --ssl-key "$here/fixtures/tls/key.pem")
    scheme=https
    export NODE_EXTRA_CA_CERTS="$here/fixtures/tls/cert.pem"
fi
HALFORMER_API_KEY=$([ "$mode" = secure ] && echo env-key || true) \
    "$exe" serve "$model" --port 0 --model-name "$name" "${extra[@]}" >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log" "$keys"' EXIT
port=
for _ in $(seq 1 300); do
    port=$(sed -n 's|.*on https\{0,1\}://[^:]*:\([0-9]*\).*|\1|p' "$log")
    [ -n "$port" ] && break
    kill -0 $pid 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.1
done
[ -n "$port" ] || { echo "the server did not start"; cat "$log"; exit 1; }
echo "[openai] openai@$OPENAI_VERSION (node $(node --version)) against halformer serve on port $port"
node "$cache/$client" "$scheme://127.0.0.1:$port/v1" "$name"
kill -TERM $pid
wait $pid
