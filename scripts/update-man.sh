#!/usr/bin/env bash
# Regenerates the OPTIONS section of man/libreyolo-train.1 from the option table
# (`libreyolo man-options`). The [man] unit test fails until this is run after a table change.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
binary=${1:-$root/build/tools/libreyolo/libreyolo}
page=$root/man/libreyolo-train.1
{
  sed -n '1,/^\.SH OPTIONS$/p' "$page"
  "$binary" man-options
  sed -n '/^\.SH EXAMPLES$/,$p' "$page"
} >"$page.new"
mv "$page.new" "$page"
echo "updated $page"
