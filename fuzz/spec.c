/* Fuzz target: PartitionSpec text (spmd_spec_parse, spmd_spec_init).
   Any text is either refused with a status and a message, or parsed; a
   parsed spec formats to text that parses back to an equal spec (the
   header promises the round trip). Build and run: see fuzz/README. */
#define SPMDCOLL_IMPLEMENTATION
#include "../spmdcoll.h"
#include <assert.h>

static int spec_equal(const spmd_spec *a, const spmd_spec *b) {
    int i, j;
    if (a->rank != b->rank || a->npartial != b->npartial) return 0;
    for (i = 0; i < a->rank; i++) {
        if (a->naxes[i] != b->naxes[i]) return 0;
        for (j = 0; j < a->naxes[i]; j++)
            if (strcmp(a->axes[i][j], b->axes[i][j]) != 0) return 0;
    }
    for (j = 0; j < a->npartial; j++)
        if (strcmp(a->partial[j], b->partial[j]) != 0) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = (char *)malloc(size + 1), buf[4096];
    const char *dims[SPMD_MAX_RANK + 2];
    spmd_spec a, b;
    spmd_msg why;
    spmd_status s;
    int n, rank = 0;
    size_t i, start = 0;
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    s = spmd_spec_parse(text, &a, &why);
    if (s == SPMD_OK) {
        n = spmd_spec_format(&a, buf, sizeof buf);
        assert(n >= 0 && (size_t)n < sizeof buf);
        s = spmd_spec_parse(buf, &b, &why);
        assert(s == SPMD_OK);
        assert(spec_equal(&a, &b));
        n = spmd_spec_format(&b, buf + 2048, 2048);
        assert(n >= 0 && strcmp(buf, buf + 2048) == 0);
    } else {
        assert(why.text[0] != '\0');
    }
    /* the same bytes as spmd_spec_init's dims (split at '|') and partial (after '#') */
    for (i = 0; i <= size && rank < SPMD_MAX_RANK + 2; i++)
        if (i == size || text[i] == '|' || text[i] == '#') {
            int last = i == size || text[i] == '#';
            text[i] = '\0';
            dims[rank++] = text + start;
            start = i + 1;
            if (last) break;
        }
    s = spmd_spec_init(&a, rank - 1 > SPMD_MAX_RANK ? SPMD_MAX_RANK + 1 : rank - 1, dims,
                       start <= size ? text + start : NULL, &why);
    if (s == SPMD_OK) {
        n = spmd_spec_format(&a, buf, sizeof buf);
        assert(n >= 0 && (size_t)n < sizeof buf);
        assert(spmd_spec_parse(buf, &b, &why) == SPMD_OK);
    }
    free(text);
    return 0;
}
