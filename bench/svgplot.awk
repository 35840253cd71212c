# svgplot.awk - a line plot with log-log axes as SVG (800x500), on stdout.
#
#   awk -f bench/svgplot.awk -v title=T -v subtitle=S -v xlabel=X -v ylabel=Y \
#       [-v xfmt=bytes] data.tsv > plot.svg
#
# Input: one point per line, "series<TAB>x<TAB>y"; series appear in the
# legend (in the emptiest corner) in the order of their first line, each a coloured line
# with a dot per point, sorted by x; a series named "... floor ..." is drawn
# grey and dashed. Points with x or y <= 0 are left out (log axes). x ticks
# at powers of 2 (xfmt=bytes: labelled 512, 4K, 16M with K = 1024), y ticks
# at powers of 10 (and 2x, 5x when the range is short).
function esc(s) { gsub(/&/, "\\&amp;", s); gsub(/</, "\\&lt;", s); gsub(/>/, "\\&gt;", s); return s }
function log2(v) { return log(v) / log(2) }
function log10(v) { return log(v) / log(10) }
function px(v) { return X0 + (log2(v) - xlo) / (xhi - xlo) * (X1 - X0) }
function py(v) { return Y1 - (log10(v) - ylo) / (yhi - ylo) * (Y1 - Y0) }
function bytes(v) {
    if (v >= 1073741824) return v / 1073741824 "G"
    if (v >= 1048576) return v / 1048576 "M"
    if (v >= 1024) return v / 1024 "K"
    return v
}
function text(x, y, s, extra) { printf "<text x=\"%.1f\" y=\"%.1f\" %s>%s</text>\n", x, y, extra, esc(s) }
function line(xa, ya, xb, yb, style) { printf "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" %s/>\n", xa, ya, xb, yb, style }

BEGIN { FS = "\t"; W = 800; H = 500; X0 = 80; X1 = W - 24; Y0 = 62; Y1 = H - 68 }
!($1 in idx) { idx[$1] = ++ns; name[ns] = $1 }
$2 > 0 && $3 > 0 {
    s = idx[$1]; n = ++np[s]; xs[s, n] = $2 + 0; ys[s, n] = $3 + 0
    if (!seen++ || $2 + 0 < xmin) xmin = $2 + 0
    if (seen == 1 || $2 + 0 > xmax) xmax = $2 + 0
    if (seen == 1 || $3 + 0 < ymin) ymin = $3 + 0
    if (seen == 1 || $3 + 0 > ymax) ymax = $3 + 0
}
END {
    if (!seen) { print "svgplot.awk: no points to plot" > "/dev/stderr"; exit 1 }
    xlo = int(log2(xmin) + 1e-9); if (2 ^ xlo > xmin * (1 + 1e-9)) xlo--
    xhi = int(log2(xmax) - 1e-9); if (2 ^ xhi < xmax * (1 - 1e-9)) xhi++
    if (xhi <= xlo) xhi = xlo + 1
    ylo = int(log10(ymin) + 1e-9); if (10 ^ ylo > ymin * (1 + 1e-9)) ylo--
    yhi = int(log10(ymax) - 1e-9); if (10 ^ yhi < ymax * (1 - 1e-9)) yhi++
    if (yhi <= ylo) yhi = ylo + 1
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" ", W, H, W, H
    printf "font-family=\"sans-serif\" font-size=\"13\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
    text(W / 2, 24, title, "text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\"")
    text(W / 2, 44, subtitle, "text-anchor=\"middle\" font-size=\"12\" fill=\"#555\"")
    # grid and tick labels: x every 2^step (at most 12 ticks), y every decade (and 2x, 5x)
    step = int((xhi - xlo + 11) / 12)
    for (e = xlo; e <= xhi; e++) {
        if (e % step) continue
        x = px(2 ^ e)
        line(x, Y0, x, Y1, "stroke=\"#ddd\"")
        text(x, Y1 + 18, xfmt == "bytes" ? bytes(2 ^ e) : 2 ^ e, "text-anchor=\"middle\"")
    }
    for (e = ylo; e <= yhi; e++) {
        line(X0, py(10 ^ e), X1, py(10 ^ e), "stroke=\"#ccc\"")
        text(X0 - 6, py(10 ^ e) + 4, sprintf("%g", 10 ^ e), "text-anchor=\"end\"")
        for (m = 2; m <= 5 && e < yhi; m += 3) {
            line(X0, py(m * 10 ^ e), X1, py(m * 10 ^ e), "stroke=\"#eee\"")
            if (yhi - ylo <= 2) text(X0 - 6, py(m * 10 ^ e) + 4, sprintf("%g", m * 10 ^ e), "text-anchor=\"end\" fill=\"#777\"")
        }
    }
    printf "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>\n", X0, Y0, X1 - X0, Y1 - Y0
    text((X0 + X1) / 2, H - 22, xlabel, "text-anchor=\"middle\" font-size=\"14\"")
    text(20, (Y0 + Y1) / 2, ylabel, sprintf("text-anchor=\"middle\" font-size=\"14\" transform=\"rotate(-90 20 %.1f)\"", (Y0 + Y1) / 2))
    # series: points sorted by x, a polyline and a dot per point
    split("#1c5fbd #d9480f #2b8a3e #862e9c #c2255c #0b7285 #5c940d #e67700", colour, " ")
    c = 0
    for (s = 1; s <= ns; s++) {
        for (i = 2; i <= np[s]; i++)
            for (j = i; j > 1 && xs[s, j - 1] > xs[s, j]; j--) {
                t = xs[s, j]; xs[s, j] = xs[s, j - 1]; xs[s, j - 1] = t
                t = ys[s, j]; ys[s, j] = ys[s, j - 1]; ys[s, j - 1] = t
            }
        floor = name[s] ~ /floor/
        col[s] = floor ? "#777" : colour[c++ % 8 + 1]
        dash[s] = floor ? " stroke-dasharray=\"6 4\"" : ""
        printf "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", col[s], dash[s]
        for (i = 1; i <= np[s]; i++) printf "%s%.1f,%.1f", (i > 1 ? " " : ""), px(xs[s, i]), py(ys[s, i])
        printf "\"/>\n"
        for (i = 1; i <= np[s]; i++)
            printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", px(xs[s, i]), py(ys[s, i]), col[s]
    }
    # legend: in the corner of the axes (top left, bottom right, top right,
    # bottom left) that covers the least of the lines (10 samples a segment)
    wide = 0
    for (s = 1; s <= ns; s++) if (length(name[s]) > wide) wide = length(name[s])
    lw = wide * 7.2 + 48; lh = ns * 20 + 8
    split(sprintf("%d %d %d %d", X0 + 10, X1 - 10 - lw, X1 - 10 - lw, X0 + 10), cx, " ")
    split(sprintf("%d %d %d %d", Y0 + 10, Y1 - 10 - lh, Y0 + 10, Y1 - 10 - lh), cy, " ")
    for (k = 1; k <= 4; k++) {
        hits = 0
        for (s = 1; s <= ns; s++)
            for (i = 1; i <= np[s]; i++)
                for (f = 0; f < (i < np[s] ? 1 : 0.1); f += 0.1) {
                    x = px(xs[s, i]); y = py(ys[s, i])
                    if (i < np[s]) { x += f * (px(xs[s, i + 1]) - x); y += f * (py(ys[s, i + 1]) - y) }
                    hits += x >= cx[k] - 5 && x <= cx[k] + lw + 5 && y >= cy[k] - 5 && y <= cy[k] + lh + 5
                }
        if (k == 1 || hits < best) { best = hits; lx = cx[k]; ly = cy[k] }
    }
    printf "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"white\" fill-opacity=\"0.9\" stroke=\"#999\"/>\n",
           lx, ly, lw, lh
    for (s = 1; s <= ns; s++) {
        y = ly + s * 20 - 6
        line(lx + 8, y, lx + 36, y, sprintf("stroke=\"%s\" stroke-width=\"2\"%s", col[s], dash[s]))
        text(lx + 44, y + 4, name[s], "")
    }
    print "</svg>"
}
