#!/usr/bin/env bash
# The HTML report in a real browser: `compare --report` writes a page,
# headless chromium renders it to a PNG and dumps the DOM it parsed, and
# the test checks that the picture is not blank and that every plot is in
# the rendered document. Skips (exit 77, ctest's SKIP_RETURN_CODE) where
# chromium is not installed: `scripts/setup.sh --report` installs it.
#   tests/report_render_test.sh PATH/TO/umlab
set -euo pipefail

umlab=${1:?usage: report_render_test.sh PATH/TO/umlab}
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "SKIP: chromium is not installed (scripts/setup.sh --report installs it)"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$umlab" compare --workload=mlp --workload-arg layers=2,hidden=512,batch=256,iterations=3 \
  --policies=demand,deepum,ideal --report="$work/report.html" >/dev/null

# Root needs --no-sandbox; a private profile keeps runs apart; a proxy
# that refuses every connection makes any network request fail, so a page
# that depended on one would render incomplete here.
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run
       --user-data-dir="$work/profile" --proxy-server=127.0.0.1:9
       --window-size=1000,3200)
timeout 120 "$browser" "${flags[@]}" --screenshot="$work/report.png" \
  "file://$work/report.html" >"$work/chromium.log" 2>&1 || {
  cat "$work/chromium.log" >&2
  echo "FAIL: chromium could not render the report" >&2
  exit 1
}
timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$work/report.html" \
  >"$work/dom.html" 2>>"$work/chromium.log"

python3 - "$work/report.png" "$work/dom.html" <<'EOF'
import re, struct, sys, zlib

png_path, dom_path = sys.argv[1], sys.argv[2]

def pixels(path):
    """Decodes an 8-bit RGB or RGBA PNG (what chromium writes) to rows of bytes."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("FAIL: the screenshot is not a PNG")
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    if depth != 8 or colour not in (2, 6):
        sys.exit(f"FAIL: unexpected PNG depth {depth} colour type {colour}")
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, previous = [], bytearray(stride)
    for y in range(height):
        base = y * (stride + 1)
        kind, line = raw[base], bytearray(raw[base + 1:base + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = previous[i]
            c = previous[i - bpp] if i >= bpp else 0
            if kind == 1: line[i] = (line[i] + a) & 255
            elif kind == 2: line[i] = (line[i] + b) & 255
            elif kind == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, bpp, rows

width, height, bpp, rows = pixels(png_path)
inked, colours = 0, set()
for row in rows[::4]:  # every fourth row is plenty and keeps the test quick
    for x in range(0, width * bpp, bpp):
        r, g, b = row[x], row[x + 1], row[x + 2]
        if r < 235 or g < 235 or b < 235:
            inked += 1
            colours.add((r >> 4, g >> 4, b >> 4))
share = inked / (width * len(rows[::4]))
print(f"screenshot {width}x{height}: {share:.1%} of pixels inked, {len(colours)} colours")
if share < 0.02 or len(colours) < 8:
    sys.exit("FAIL: the rendered report is blank or nearly so")

dom = open(dom_path, encoding="utf-8", errors="replace").read()
plots = ["comparison", "iterations", "kernel-faults", "residency", "link", "prefetch", "lateness"]
missing = [p for p in plots if f'data-plot="{p}"' not in dom]
if missing:
    sys.exit(f"FAIL: the rendered document lacks the plots {missing}")
if len(re.findall(r"<svg\b", dom)) < 10:
    sys.exit("FAIL: chromium parsed fewer SVG charts than the report holds")
print("every plot is in the rendered document")
EOF
