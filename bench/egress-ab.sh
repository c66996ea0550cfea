#!/bin/bash
# Two turngate builds' egress downloads interleaved with direct ones (docs/performance.md).
#   bench/egress-ab.sh OLD_EXE NEW_EXE PORT DIR
# PORT: a server like bench/egress.py's serving /big; DIR holds policy.toml (allow every
# shell command, network "ask") and ws/ (the workspace).
OLD=$1; NEW=$2; P=$3; cd "$4" || exit 1
dl() { $1 run --mode auto_accept_edits --net restricted --allow-net 127.0.0.1:$P --policy policy.toml --approver deny --workspace "$PWD/ws" --store "$PWD/a.db" -- curl -sS -o /dev/null -w '%{speed_download}' $2 http://127.0.0.1:$P/big; }
for r in $(seq 1 12); do
  d=$(curl -sS -o /dev/null -w '%{speed_download}' --noproxy '*' http://127.0.0.1:$P/big)
  echo "round $r direct $((d/1000000)) old: tunnel $(($(dl $OLD -p)/1000000)) plain $(($(dl $OLD '')/1000000)) new: tunnel $(($(dl $NEW -p)/1000000)) plain $(($(dl $NEW '')/1000000))"
done
