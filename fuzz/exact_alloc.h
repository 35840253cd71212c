/* What the bootstrap fuzz targets share: an allocator that gives every
   block exactly its size (ASan then catches a read one byte past a
   message), and a bootstrap state made with it, logging off, no sockets. */
#ifndef FUZZ_EXACT_ALLOC_H
#define FUZZ_EXACT_ALLOC_H
static void *exact_alloc(size_t size, size_t align, void *user) {
    void *p = NULL;
    (void)user;
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) == 0 ? p : NULL;
}
static void exact_free(void *p, void *user) {
    (void)user;
    free(p);
}
static spmd__boot *fuzz_boot(void) {
    spmd_allocator a;
    spmd__boot *b;
    memset(&a, 0, sizeof a);
    a.alloc = exact_alloc;
    a.free = exact_free;
    b = (spmd__boot *)spmd__alloc(&a, sizeof *b);
    b->alloc = a;
    b->log_level = SPMD_LOG_OFF;
    b->listen_fd = -1;
    return b;
}
#endif
