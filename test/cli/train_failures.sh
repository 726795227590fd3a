# A run that fails keeps what it trained and says so: a validation image that passes the scan
# (its PNG header is fine) but cannot be decoded ends the run with exit 3, a clear message,
# status.json "failed" and last.pt holding the epoch's weights; results.csv has no row for it.
. "$(dirname "$0")/lib.sh"
"$LIBREYOLO" data synth out=ds synth_images=8 synth_val_images=4 synth_size=64 quiet=true >/dev/null 2>&1 || { echo "synth failed"; exit 1; }
command -v python3 >/dev/null || { echo "skipped: no python3 to write the broken PNG"; exit 77; }
python3 - <<'PY' || { echo "could not write the broken PNG"; exit 1; }
import glob, os, struct, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
image = sorted(glob.glob("ds/images/val/*.jpg"))[0]
header = struct.pack(">IIBBBBB", 20000, 20000, 8, 2, 0, 0, 0)  # 20000 x 20000 RGB, data cut short
with open(image[:-4] + ".png", "wb") as out:
    out.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 1000)[:50]) + chunk(b"IEND", b""))
os.remove(image)
PY

expect_exit 3 train model=yolo9-t data=ds/data.yaml epochs=1 batch=4 imgsz=64 workers=1 aux_weight=0 project=runs name=a
expect_in "$WORK/err" "000000.png"
expect_in "$WORK/err" "validation after epoch 1 failed; runs/a/weights/last.pt holds the epoch's weights"
expect_in runs/a/status.json '"state": "failed"'
[ -s runs/a/weights/last.pt ] || fail "no last.pt after a failed validation"
expect_exit 0 info model=runs/a/weights/last.pt --json
expect_in "$WORK/out" '"nc":4'
[ ! -e runs/a/results.csv ] || [ "$(wc -l < runs/a/results.csv)" -le 1 ] || fail "results.csv has a row for the failed epoch"

finish
