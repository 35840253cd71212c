# median.awk - per (collective, size) the median over several runs' CSV
# files (bench and mpi_bench --csv) of the time, busbw and floor columns
# (7, 9, 11); the comment lines and header of the first file. Run as
#   awk -F, -v OFS=, -f bench/median.awk ROUND1.csv ROUND2.csv ...
# (bench/compare_mpi.sh and bench/cluster.sh).
function med(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
FNR == 1 { file++ }
/^#/ || /^coll,/ { if (file == 1) print; next }
{
    k = $1 SUBSEP $2
    if (!(k in row)) { row[k] = $0; order[++n] = k }
    t[k] = t[k] " " $7; b[k] = b[k] " " $9; c[k] = c[k] " " $11
}
END {
    for (i = 1; i <= n; i++) {
        k = order[i]
        nf = split(row[k], f, ",")
        f[7] = med(t[k]); f[9] = med(b[k]); if (f[11] != "") f[11] = med(c[k])
        line = f[1]
        for (j = 2; j <= nf; j++) line = line "," f[j]
        print line
    }
}
