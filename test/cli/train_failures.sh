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
header = struct.pack(">IIBBBBB", 2000, 2000, 8, 2, 0, 0, 0)  # 2000 x 2000 RGB, data cut short
with open(image[:-4] + ".png", "wb") as out:
    out.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 1000)[:50]) + chunk(b"IEND", b""))
os.remove(image)
PY

expect_exit 3 train model=yolo9-t data=ds/data.yaml epochs=1 batch=4 imgsz=64 workers=1 aux_weight=0 project=runs name=a
expect_in "$WORK/err" "000000.png"
expect_in "$WORK/err" "validation after epoch 1 failed; runs/a/weights/last.pt holds the epoch's weights"
expect_in runs/a/status.json '"state": "failed"'
expect_in runs/a/status.json '"message": "'
expect_in runs/a/train.log "ERROR: "
[ -s runs/a/weights/last.pt ] || fail "no last.pt after a failed validation"
expect_exit 0 info model=runs/a/weights/last.pt --json
expect_in "$WORK/out" '"nc":4'
[ ! -e runs/a/results.csv ] || [ "$(wc -l < runs/a/results.csv)" -le 1 ] || fail "results.csv has a row for the failed epoch"

# resume=path/to/last.pt resumes that run (Ultralytics' spelling); a temporary a kill -9 left is removed
good=runs/good
expect_exit 0 train model=yolo9-t data=ds/data.yaml epochs=1 batch=4 imgsz=64 workers=1 val=false project=runs name=good
: > "$good/weights/.last.pt.tmp.2147480000.0"
expect_exit 0 train resume="$good/weights/last.pt" epochs=2
expect_in "$WORK/err" "Resuming from $good/weights/last.pt: epoch 2"
expect_in "$WORK/err" "Training complete: 2 epochs"  # the run's epochs, not this process's
grep -q "PGI auxiliary branch" "$WORK/err" && fail "the PGI note is printed although resume restores the branch"
t1=$(sed -n 2p "$good/results.csv" | cut -d, -f2); t2=$(sed -n 3p "$good/results.csv" | cut -d, -f2)
awk -v a="$t1" -v b="$t2" 'BEGIN { exit !(b > a) }' || fail "the time column restarted on resume ($t1, then $t2)"
expect_in "$WORK/err" "Removed 1 temporary file(s)"
[ ! -e "$good/weights/.last.pt.tmp.2147480000.0" ] || fail "the stale temporary is still there"
expect_in "$good/status.json" '"state": "completed"'

# commands that fail before training starts leave no run folder
# (and say so before "Logging results to ...", in their own words)
expect_exit 2 train model=yolo9-t data=ds/data.yaml epochs=1 batch=0 imgsz=64 project=orphans name=a
expect_in "$WORK/err" "batch=0 is not a batch size: give 1 or more"
grep -q "batch=-1\|Logging results" "$WORK/err" && fail "batch=0: $(cat "$WORK/err")"
expect_exit 2 train model=yolo9-t data=ds/data.yaml epochs=1 batch=-1 imgsz=64 project=orphans name=a
expect_in "$WORK/err" "batch=-1 (AutoBatch) needs a GPU and is not built yet"
expect_exit 2 train model=yolo9-t data=ds/data.yaml epochs=1 imgsz=64 device=cuda:0 project=orphans name=b
grep -q "Logging results" "$WORK/err" && fail "device=cuda:0 logged a run folder before its error: $(cat "$WORK/err")"
expect_exit 2 train model=yolo9-t data=ds/data.yaml epochs=1 imgsz=64 project= name=b
expect_in "$WORK/err" "project='' is not valid"
mkdir -p empty/images/train empty/images/val
printf 'path: %s\ntrain: images/train\nval: images/val\nnames: [a]\n' "$PWD/empty" > empty/data.yaml
expect_exit 3 train model=yolo9-t data=empty/data.yaml epochs=1 imgsz=64 project=orphans name=c
[ -z "$(ls -A orphans 2>/dev/null)" ] || fail "orphan run folders: $(ls orphans)"
expect_exit 2 train model=yolo9-t data=ds/data.yaml epochs=1 imgsz=64 project=runs name=.. exist_ok=true
expect_in "$WORK/err" "name='..' is not valid"

# bad input refused early with its code: nesterov without momentum (2), a YAML without train: (3);
# an odd imgsz is rounded up to the stride, workers capped at the CPUs
expect_exit 2 train model=yolo9-t data=ds/data.yaml epochs=1 imgsz=64 momentum=-0 project=orphans name=d
expect_in "$WORK/err" "nesterov=true needs momentum > 0"
printf 'path: %s\nval: images/val\nnames: [a, b, c, d]\n' "$PWD/ds" > notrain.yaml
expect_exit 3 train model=yolo9-t data=notrain.yaml epochs=1 imgsz=64 project=orphans name=e
expect_in "$WORK/err" "the key 'train' is missing"
[ -z "$(ls -A orphans 2>/dev/null)" ] || fail "orphan run folders: $(ls orphans)"
expect_exit 0 train model=yolo9-t data=ds/data.yaml epochs=1 batch=4 imgsz=33 workers=1000 val=false project=runs name=odd
expect_in "$WORK/err" "imgsz=33 must be a multiple of the maximum stride 32: updated to 64"
expect_in "$WORK/err" "workers=1000 capped at the"
expect_in runs/odd/train_config.yaml "imgsz: 64"

# a full disk while writing a checkpoint (a file-size limit stands in for it): a clear error, exit 1,
# status.json failed, no temporary left, no crash. SIGXFSZ at its default (it kills the process),
# as in a user's shell: libreyolo ignores it itself, so the write fails with EFBIG instead.
( trap - XFSZ; ulimit -f 4096; exec "$LIBREYOLO" train model=yolo9-t data=ds/data.yaml epochs=2 batch=4 imgsz=64 workers=1 \
    val=false project=runs name=full ) >"$WORK/out" 2>"$WORK/err"
code=$?
[ "$code" -eq 1 ] || fail "a failed checkpoint write exited $code, expected 1"
expect_in "$WORK/err" "cannot write runs/full/weights/last.pt: File too large"
expect_in "$WORK/err" "larger than this process may write (ulimit -f)"
grep -q "Free some space" "$WORK/err" && fail "a file-size limit was called a full disk"
expect_in runs/full/status.json '"state": "failed"'
[ -z "$(ls -A runs/full/weights)" ] || fail "left in weights/: $(ls -A runs/full/weights)"

# two processes in one run folder: the second is refused while the first trains
"$LIBREYOLO" train model=yolo9-t data=ds/data.yaml epochs=300 batch=4 imgsz=64 workers=1 aux_weight=0 val=false \
  project=runs name=busy exist_ok=true quiet=true >/dev/null 2>&1 &
first=$!
for _ in $(seq 100); do grep -q '"running"' runs/busy/status.json 2>/dev/null && break; sleep 0.2; done
expect_exit 2 train model=yolo9-t data=ds/data.yaml epochs=1 imgsz=64 project=runs name=busy exist_ok=true
expect_in "$WORK/err" "another libreyolo process (pid $first) is training in runs/busy"
kill -TERM "$first"
for _ in $(seq 150); do kill -0 "$first" 2>/dev/null || break; sleep 0.2; done
kill -KILL "$first" 2>/dev/null && fail "the first run did not stop on SIGTERM"
wait "$first"; [ $? -eq 143 ] || fail "the first run did not end with 143"
expect_in runs/busy/status.json '"state": "interrupted"'

# a decompression bomb (a 20000 x 20000 PNG header) is skipped by the scan with a warning, before decoding
python3 - <<'PY'
import struct, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
with open("ds/images/train/bomb.png", "wb") as out:
    out.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 20000, 20000, 8, 2, 0, 0, 0))
              + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b""))
PY
expect_exit 0 data check data=ds/data.yaml
expect_in "$WORK/out" "1 corrupt"
expect_in "$WORK/out" "20000x20000 = 400000000 pixels, over the 89478485-pixel limit"

# symbolic link loops in an image folder: each is skipped with a warning, the rest is listed once
ln -s self.jpg ds/images/train/self.jpg
mkdir ds/images/train/sub && ln -s .. ds/images/train/sub/up
expect_exit 0 data check data=ds/data.yaml
expect_in "$WORK/err" "ds/images/train/self.jpg: Too many levels of symbolic links; skipped"
expect_in "$WORK/err" "ds/images/train/sub/up: a symbolic link to a folder that is already listed (a loop); skipped"
expect_in "$WORK/out" "8 images"
# a folder of nothing but a loop: a data error naming the split
mkdir -p loop/images/train && ln -s me.jpg loop/images/train/me.jpg
printf 'path: .\ntrain: images/train\nval: images/train\nnames: [a]\n' > loop/data.yaml
expect_exit 3 train model=yolo9-t data=loop/data.yaml epochs=1 imgsz=64 project=orphans
expect_in "$WORK/err" "loop/images/train/me.jpg: Too many levels of symbolic links; skipped"
[ -z "$(ls -A orphans 2>/dev/null)" ] || fail "orphan run folders: $(ls orphans)"

# an image replaced after the scan by a decompression bomb of the same size and time (so the label
# cache still vouches for it): refused from its header where it is decoded, naming it, exit 3
"$LIBREYOLO" data synth out=bomb synth_images=8 synth_val_images=4 synth_size=64 quiet=true >/dev/null 2>&1
expect_exit 0 train model=yolo9-t data=bomb/data.yaml epochs=1 batch=4 imgsz=64 workers=1 val=false project=runs name=bomb1
victim=bomb/images/train/000003.jpg
cp -p "$victim" stamp
python3 - "$victim" <<'PY'
import os, struct, sys, zlib
path = sys.argv[1]
size = os.path.getsize(path)
ihdr = struct.pack(">IIBBBBB", 20000, 20000, 8, 2, 0, 0, 0)
png = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
open(path, "wb").write(png + b"\0" * (size - len(png)))
PY
touch -r stamp "$victim"
expect_exit 3 train model=yolo9-t data=bomb/data.yaml epochs=1 batch=4 imgsz=64 workers=1 val=false project=runs name=bomb2
expect_in "$WORK/err" "000003.jpg"
expect_in "$WORK/err" "20000x20000 = 400000000 pixels, over the 89478485-pixel limit"
expect_in runs/bomb2/status.json '"state": "failed"'
finish
