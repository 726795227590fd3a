# timeline.html renders in headless Chromium (Debian's chromium, installed by scripts/setup.sh)
# with no console error, draws the trace's events and keeps the screenshot when asked
# (LIBREYOLO_SCREENSHOT=path). Skips (77) without chromium.
. "$(dirname "$0")/lib.sh"
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "skipped: no chromium"; exit 77; }
"$LIBREYOLO" data synth out=ds synth_images=16 synth_val_images=4 synth_size=96 quiet=true >/dev/null 2>&1 || { echo "synth failed"; exit 1; }

expect_exit 0 train model=yolo9-t data=ds/data.yaml imgsz=96 batch=4 epochs=8 profile=true profile_then_stop=true \
  profile_warmup=1 profile_steps=4 val=false workers=1 project=runs name=t quiet=true
page="$WORK/runs/t/timeline.html"
[ -s "$page" ] || { fail "no timeline.html"; finish; }
grep -q "https\?://" "$page" && fail "timeline.html refers to the network"

flags="--headless --no-sandbox --disable-gpu --no-first-run --disable-extensions --user-data-dir=$WORK/chrome"
# --enable-logging=stderr --v=0 prints every console message as "CONSOLE(...)" / "Uncaught ..."
timeout 120 "$browser" $flags --enable-logging=stderr --v=0 --virtual-time-budget=5000 --dump-dom "file://$page" \
  >dom.html 2>console.log || fail "chromium exited $?"
rendered=$(sed -n 's/.*data-rendered="\([0-9]*\)".*/\1/p' dom.html | head -1)
[ -n "$rendered" ] && [ "$rendered" -gt 0 ] || { fail "the page did not finish rendering (data-rendered='$rendered')"; grep -i "console\|uncaught" console.log | head; }
if grep -E "CONSOLE|Uncaught|SyntaxError|TypeError|ReferenceError" console.log | grep -v "dbus" >errors.txt; [ -s errors.txt ]; then
  fail "console errors:"; sed 's/^/  | /' errors.txt | head -20
fi
expect_in dom.html "Verdict:"
shot="${LIBREYOLO_SCREENSHOT:-$WORK/timeline.png}"
timeout 120 "$browser" $flags --window-size=1400,800 --screenshot="$shot" "file://$page" >/dev/null 2>&1 || fail "screenshot failed"
[ -s "$shot" ] || fail "no screenshot"
echo "rendered $rendered events; screenshot $shot"
finish
